"""A time limit on a call that reads what has already arrived before it stops the call.

`asyncio.timeout` cancels its task from the timer's own callback. A process frozen past
the limit (a stopped process, a paused VM) wakes with the timer expired and an answer
that came meanwhile waiting in the socket: the event loop hands the socket's data to
its protocol first, but the task that waits for it runs a turn later, after the timer
has cancelled it. The call then read as stopped, though the target had answered.

`deadline` expires one turn of the event loop later than its timer: the task woken by
data already there runs first, and the limit stops only a call still waiting.
"""

from __future__ import annotations

import asyncio
from types import TracebackType


class deadline:  # lower case: used as `async with deadline(seconds)`, as asyncio.timeout
    """`asyncio.timeout(seconds)`, expiring one turn of the event loop after its timer."""

    __slots__ = ("_handle", "_seconds", "_timeout")

    def __init__(self, seconds: float | None) -> None:
        self._seconds = seconds
        self._timeout = asyncio.timeout(None)
        self._handle: asyncio.TimerHandle | None = None

    async def __aenter__(self) -> deadline:
        await self._timeout.__aenter__()
        if self._seconds is not None:
            loop = asyncio.get_running_loop()
            self._handle = loop.call_later(self._seconds, self._expire, loop)
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
        await self._timeout.__aexit__(exc_type, exc, traceback)  # raises TimeoutError
