"""Time limits on a call that read what has already arrived before they stop the call,
and that no request is sent past.

A process frozen past a limit (a stopped process, a paused VM, a long pause of the
collector) wakes with the limit's timer expired and an answer that came meanwhile
waiting in the socket. Two things would then stop the call though the target answered:

- `asyncio.timeout` cancels its task from the timer's own callback; the task woken by the
  data runs a turn later. `deadline` expires one turn later than its timer.
- On Linux a stopped process's `epoll_wait` returns EINTR when it is continued, and
  Python ends that poll with no event once its timeout has passed: the timers run in a
  turn that has not seen the socket at all. So a timer that fires `STALL` or more past
  its time (the event loop itself was held up) is set once more, `GRACE` on (`Expiry`):
  what arrived is read meanwhile, and a call still waiting is stopped then.

Neither may let a request out. A frozen process also wakes with other timers expired (a
retry's wait, say) whose tasks run meanwhile, and one of them could send a request after
a run's lease had expired, when another replica may already run the occurrence
(docs/reliability.md, "The zombie rule"). So a `deadline` that bounds sends
(`bounds_sends=True`: the engine's, a run's budget) is also read by the clock at the
moment a request would be written (`check_may_send`, called by the executor's
connections): past it, nothing is sent, grace or not.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from contextvars import ContextVar, Token
from types import TracebackType

# A timer this late was held up with its whole event loop, not by the calls it serves.
STALL = 0.5
# How long after such a stall a limit waits for what arrived meanwhile to be read.
GRACE = 1.0

# The event loop's time past which the current task may send no request.
_send_by: ContextVar[float] = ContextVar("send_by", default=math.inf)


class TooLateToSend(Exception):
    """A request was not sent: the limit of its call had passed by the clock (the
    process was held up past it)."""


def check_may_send() -> None:
    """Raise TooLateToSend when the limit of an enclosing `deadline(bounds_sends=True)`
    has passed, by the clock, whether or not its timer has fired (or been graced)."""
    if asyncio.get_running_loop().time() >= _send_by.get():
        raise TooLateToSend("the call's time limit passed before its request was sent")


class Expiry:
    """`expire()` called `seconds` from now, or, when its timer fires `STALL` or more
    late, once more `GRACE` after that (see the module's docstring)."""

    __slots__ = ("_expire", "_graced", "_handle", "_when")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, seconds: float, expire: Callable[[], None]
    ) -> None:
        self._expire = expire
        self._graced = False
        # A limit already past (a call that started after its budget was spent) is due
        # now: only the event loop's own delay from here can read as a stall.
        self._when = loop.time() + max(seconds, 0.0)
        self._handle = loop.call_at(self._when, self._fire, loop)

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        if not self._graced and now - self._when >= STALL:
            self._graced = True
            self._when = now + GRACE
            self._handle = loop.call_at(self._when, self._fire, loop)
            return
        self._expire()

    def cancel(self) -> None:
        self._handle.cancel()


class deadline:  # lower case: used as `async with deadline(seconds)`, as asyncio.timeout
    """`asyncio.timeout(seconds)`, expiring one turn of the event loop after its timer,
    and a grace later after a stall (`Expiry`); with `bounds_sends`, also the instant
    past which `check_may_send` refuses (never graced)."""

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
        # that this turn's data has already woken.
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
