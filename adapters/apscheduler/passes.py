"""Claim passes: what a fired schedule's job does, through the store's own claim.

A pass is the application's `ClaimPass`, the very one the native loop runs (batch
sizing, at most half the ceiling per claim, the per-batch log line; misfire,
coalescing, jitter, leases and run history stay the store's and the domain's). Passes
of one engine never overlap, and a job that fired while a pass was running waits for
that pass to end and runs a new one only if no pass began after the job was requested:
a burst of schedules firing at one instant costs one or two claim transactions, not one
per schedule.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from application.claim_pass import ClaimPass, FailingSpell
from application.engine_runs import RunRunner
from application.engine_settings import EngineSettings
from application.observer import EngineObserver
from application.ports import Clock, TaskStore

log = logging.getLogger("scheduler.engine.apscheduler")


class ClaimPasses:
    """Runs claim passes for one engine and remembers how they went."""

    def __init__(
        self,
        store: TaskStore,
        clock: Clock,
        settings: EngineSettings,
        observer: EngineObserver,
        runs: RunRunner,
        on_owed: Callable[[], None],
    ) -> None:
        self._clock = clock
        self._settings = settings
        self._observer = observer
        self._claims = ClaimPass(store, clock, settings, observer, runs, log)
        self._on_owed = on_owed
        self._lock = asyncio.Lock()
        self._begun = 0
        self.closed = False
        self.spell = FailingSpell()  # whether, and since when, passes fail
        self.covered_at: datetime | None = None

    @property
    def starved(self) -> bool:
        """A pass found no free slot: a finishing run owes one."""
        return self._claims.starved

    @starved.setter
    def starved(self, value: bool) -> None:
        self._claims.starved = value

    @property
    def failing(self) -> bool:
        """The last pass failed."""
        return self.spell.failing

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    def note_covered(self, instant: datetime) -> None:
        """Everything due at `instant` is claimed (`last_pass_at` of the engine)."""
        if self.covered_at is None or instant > self.covered_at:
            self.covered_at = instant

    async def request(self, reason: str) -> None:
        """Make sure a pass begins after this call and ends before it returns."""
        if self.closed:
            return
        seen = self._begun
        async with self._lock:
            if self.closed or (self._begun > seen and not self.failing):
                return
            await self._pass(reason)

    async def wait_idle(self) -> None:
        async with self._lock:
            return

    async def _pass(self, reason: str) -> None:
        self._begun += 1
        began = self._clock.now()
        try:
            await self._claims.run(lambda: self.closed)
        except Exception as exc:
            self.spell.failed()
            self._observer.store_error(exc)
            log.warning(
                "claim pass failed; the engine retries it",
                extra={"replica": self._settings.replica, "reason": reason, "error": repr(exc)},
            )
            self._on_owed()
            return
        self.spell.succeeded()
        self.note_covered(began)
