"""Clocks: the system's, and a fake one that tests move by hand."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from datetime import datetime, timedelta, timezone


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    async def sleep_until(self, instant: datetime) -> None:
        delay = (instant - self.now()).total_seconds()
        if delay > 0:
            await asyncio.sleep(delay)


class FakeClock:
    """A clock that only moves when told to; sleepers wake when it passes their instant."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("start must be timezone-aware")
        self._now = start.astimezone(timezone.utc)
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now(self) -> datetime:
        return self._now

    async def sleep_until(self, instant: datetime) -> None:
        if instant <= self._now:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (instant, next(self._order), future))
        await future

    def advance(self, delta: timedelta | float) -> datetime:
        """Move time forward and wake every sleeper whose instant has come."""
        if not isinstance(delta, timedelta):
            delta = timedelta(seconds=delta)
        if delta < timedelta(0):
            raise ValueError("time does not go backwards")
        return self.set(self._now + delta)

    def set(self, instant: datetime) -> datetime:
        if instant < self._now:
            raise ValueError("time does not go backwards")
        self._now = instant.astimezone(timezone.utc)
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)
        return self._now
