"""Time limits on a call that read what has already arrived before they stop the call.

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
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType

# A timer this late was held up with its whole event loop, not by the calls it serves.
STALL = 0.5
# How long after such a stall a limit waits for what arrived meanwhile to be read.
GRACE = 1.0


class Expiry:
    """`expire()` called `seconds` from now, or, when its timer fires `STALL` or more
    late, once more `GRACE` after that (see the module's docstring)."""

    __slots__ = ("_expire", "_graced", "_handle", "_when")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, seconds: float, expire: Callable[[], None]
    ) -> None:
        self._expire = expire
        self._graced = False
        self._when = loop.time() + seconds
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
    and a grace later after a stall (`Expiry`)."""

    __slots__ = ("_expiry", "_seconds", "_timeout")

    def __init__(self, seconds: float | None) -> None:
        self._seconds = seconds
        self._timeout = asyncio.timeout(None)
        self._expiry: Expiry | None = None

    async def __aenter__(self) -> deadline:
        await self._timeout.__aenter__()
        if self._seconds is not None:
            loop = asyncio.get_running_loop()
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
        await self._timeout.__aexit__(exc_type, exc, traceback)  # raises TimeoutError
