"""Time limits on a call that read what has already arrived before they stop the call,
and that no request is sent past.

A process frozen past a limit (a stopped process, a paused VM, a long pause of the
collector) wakes with the limit's timer expired and an answer that came meanwhile
waiting in the socket. Two things would then stop the call though the target answered:

- `asyncio.timeout` cancels its task from the timer's own callback; the task woken by the
  data runs a turn later.
- On Linux a stopped process's `epoll_wait` returns EINTR when it is continued, and
  Python ends that poll with no event once its timeout has passed: the timers run in a
  turn that has not seen the socket at all, however shortly past their time the
  process was continued.

So a limit (`Expiry`) waits `HOPS` more turns of the event loop once its timer has
fired: the first polls the sockets and hands what arrived to its connection, the second
runs the task that data woke, which ends the call before the limit stops it. A call
still waiting is stopped then, a few callbacks later than its time.

Those turns must not let a request out. A frozen process also wakes with other timers
expired (a retry's wait, say) whose tasks run meanwhile, and one of them could send a
request after a run's lease had expired, when another replica may already run the
occurrence (docs/reliability.md, "The zombie rule"). So a `deadline` that bounds sends
(`bounds_sends=True`: the engine's, a run's budget) is also read by the clock at the
moment a request would be written or a connection for it opened (`check_may_send`,
called by the executor's connections and pool: every request, also one sent through
httpx's own client, goes through them): past it, nothing is sent.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from contextvars import ContextVar, Token
from types import TracebackType

# Turns of the event loop a limit waits after its timer fired (see above).
HOPS = 2

# The event loop's time past which the current task may send no request.
_send_by: ContextVar[float] = ContextVar("send_by", default=math.inf)


class TooLateToSend(Exception):
    """A request was not sent: the limit of its call had passed by the clock (the
    process was held up past it)."""


def check_may_send() -> None:
    """Raise TooLateToSend when the limit of an enclosing `deadline(bounds_sends=True)`
    has passed, by the clock, whether or not its timer has fired yet."""
    if asyncio.get_running_loop().time() >= _send_by.get():
        raise TooLateToSend("the call's time limit passed before its request was sent")


class Expiry:
    """`expire()` called `HOPS` turns of the event loop after `seconds` from now (see the
    module's docstring)."""

    __slots__ = ("_expire", "_handle", "_hops")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, seconds: float, expire: Callable[[], None]
    ) -> None:
        self._expire = expire
        self._hops = HOPS
        self._handle: asyncio.Handle = loop.call_later(seconds, self._fire, loop)

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._hops:
            self._hops -= 1
            self._handle = loop.call_soon(self._fire, loop)
            return
        self._expire()

    def cancel(self) -> None:
        self._handle.cancel()


class deadline:  # lower case: used as `async with deadline(seconds)`, as asyncio.timeout
    """`asyncio.timeout(seconds)`, expiring a few turns of the event loop after its timer
    (`Expiry`); with `bounds_sends`, also the instant past which `check_may_send`
    refuses, by the clock."""

    __slots__ = ("_bounds_sends", "_expiry", "_seconds", "_timeout", "_token")

    def __init__(self, seconds: float | None, *, bounds_sends: bool = False) -> None:
        self._seconds = seconds
        self._bounds_sends = bounds_sends
        self._timeout = asyncio.timeout(None)
        self._expiry: Expiry | None = None
        self._token: Token[float] | None = None

    async def __aenter__(self) -> deadline:
        await self._timeout.__aenter__()
        if self._seconds is not None:
            loop = asyncio.get_running_loop()
            if self._bounds_sends:
                when = loop.time() + self._seconds
                self._token = _send_by.set(min(when, _send_by.get()))
            self._expiry = Expiry(loop, self._seconds, lambda: self._expire(loop))
        return self

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        # Due now: asyncio.Timeout schedules its cancel with call_soon, behind the tasks
        # that data has already woken.
        self._timeout.reschedule(loop.time())

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        if self._token is not None:
            _send_by.reset(self._token)
        await self._timeout.__aexit__(exc_type, exc, traceback)  # raises TimeoutError
