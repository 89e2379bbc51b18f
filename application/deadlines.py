"""Time limits on a call: one that reads what has already arrived before it stops the
call, and one that no request may be sent past.

`asyncio.timeout` cancels its task from the timer's own callback. A process frozen past
the limit (a stopped process, a paused VM) wakes with the timer expired and an answer
that came meanwhile waiting in the socket: the event loop hands the socket's data to
its protocol first, but the task that waits for it runs a turn later, after the timer
has cancelled it. The call then read as stopped, though the target had answered.

`deadline` expires one turn of the event loop later than its timer: the task woken by
data already there runs first, and the limit stops only a call still waiting.

That turn must not let a request out. A frozen process also wakes with other timers
expired (a retry's wait, say) whose tasks run in that same turn, and one of them could
send a request after a run's lease had expired, where another replica may already run
the occurrence (docs/reliability.md, "The zombie rule"). So a `deadline` that bounds
sends (`bounds_sends=True`: the engine's, a run's lease) is also read by the clock at
the moment a request would go out (`check_may_send`, called by the executor's
transport): past it, nothing is written.
"""

from __future__ import annotations

import asyncio
import math
from contextvars import ContextVar, Token
from types import TracebackType

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


class deadline:  # lower case: used as `async with deadline(seconds)`, as asyncio.timeout
    """`asyncio.timeout(seconds)`, expiring one turn of the event loop after its timer;
    with `bounds_sends`, also the instant past which `check_may_send` refuses."""

    __slots__ = ("_bounds_sends", "_handle", "_seconds", "_timeout", "_token")

    def __init__(self, seconds: float | None, *, bounds_sends: bool = False) -> None:
        self._seconds = seconds
        self._bounds_sends = bounds_sends
        self._timeout = asyncio.timeout(None)
        self._handle: asyncio.TimerHandle | None = None
        self._token: Token[float] | None = None

    async def __aenter__(self) -> deadline:
        await self._timeout.__aenter__()
        if self._seconds is not None:
            loop = asyncio.get_running_loop()
            when = loop.time() + self._seconds
            self._handle = loop.call_at(when, self._expire, loop)
            if self._bounds_sends:
                self._token = _send_by.set(min(when, _send_by.get()))
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
        if self._handle is not None:
            self._handle.cancel()
        if self._token is not None:
            _send_by.reset(self._token)
        await self._timeout.__aexit__(exc_type, exc, traceback)  # raises TimeoutError
