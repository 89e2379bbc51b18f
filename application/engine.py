"""The native engine: a trigger loop that wakes, claims, calls and records.

One `TriggerLoop` per process. It sleeps until the nearest `next_run_at` (at most
`max_poll_interval`) or until the waker reports a change, claims due runs in batches no
larger than its free slots, runs each claimed run as its own asyncio task, and records
the outcome. Several loops, in one process or many, share a store safely: the store's
claim is the only coordination. docs/engine.md tells the whole story.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime
from typing import TYPE_CHECKING

from application.claim_pass import ClaimPass, PassLoop, wait_for_waker, wait_or_stop
from application.engine_runs import RunRunner
from application.engine_settings import EngineSettings
from application.housekeeping import Housekeeping
from application.observer import EngineObserver, NoopObserver
from application.ports import (
    Clock,
    Engine,
    EngineTestHooks,
    Executor,
    RunDispatcher,
    TaskStore,
    Waker,
)
from domain.errors import StoreUnavailable
from domain.runs import ClaimedRun

log = logging.getLogger("scheduler.engine")

# A saturated engine claims again once a chunk of slots is free, or this many seconds
# after the first slot freed up: claims stay batched without holding a due run back
# for long.
REFILL_DELAY = 0.02


class TriggerLoop:
    """Fills the `Engine` port (and `RunDispatcher`, for manual runs) with a loop over
    the `TaskStore`, `Waker`, `Executor` and `Clock` ports."""

    def __init__(
        self,
        store: TaskStore,
        waker: Waker,
        executor: Executor,
        clock: Clock,
        settings: EngineSettings | None = None,
        observer: EngineObserver | None = None,
    ) -> None:
        self._store = store
        self._waker = waker
        self._clock = clock
        self._settings = settings = settings or EngineSettings()
        self._observer = observer = observer or NoopObserver()
        self._runs = RunRunner(store, executor, clock, settings, observer, self._slot_freed)
        self._main: asyncio.Task[None] | None = None
        self._wake: asyncio.Task[None] | None = None
        self._stopping = False
        self._stop_requested = asyncio.Event()
        self._slots_free = asyncio.Event()
        self._claims = ClaimPass(store, clock, settings, observer, self._runs, log)
        self._passes = PassLoop(settings)
        self._refill_timer: asyncio.TimerHandle | None = None
        self._waker_started = False
        self._last_pass_at: datetime | None = None
        self._housekeeping = Housekeeping(store, settings, observer, self._runs)

    @property
    def settings(self) -> EngineSettings:
        return self._settings

    @property
    def alive(self) -> bool:
        """Running, not stopping, a pass over the store succeeded, and passes have not
        failed since for FAILING_GRACE (application/claim_pass.py)."""
        main = self._main
        healthy = self._passes.healthy
        return main is not None and not main.done() and healthy and not self._stopping

    @property
    def stalled_for(self) -> float | None:
        return self._passes.stalled_for

    @property
    def in_flight(self) -> int:
        return len(self._runs)

    @property
    def behind(self) -> bool:
        """More runs are due than the engine has started: its last claim pass found no
        free slot, or its last batch came back full (a burst is under way)."""
        return self._claims.behind

    @property
    def last_pass_at(self) -> datetime | None:
        """The clock's time when the last successful pass over the store began: once it
        is at or after an instant, everything due at that instant has been claimed."""
        return self._last_pass_at

    async def start(self) -> None:
        """Start the loop in the background; returns at once. Idempotent."""
        if self._main is not None:
            return
        self._main = asyncio.create_task(self._run(), name=f"trigger-loop {self._settings.replica}")
        log.info("engine started", extra={"replica": self._settings.replica})

    def dispatch(self, claimed: ClaimedRun) -> None:
        """Run a claimed run (a manual fire) on this engine, under its ceiling."""
        self._runs.dispatch(claimed)

    def busy(self) -> str | None:
        """Why a manual fire would wait for a call slot of this process (see RunRunner)."""
        return self._runs.busy()

    async def stop(self) -> None:
        """Stop claiming, let in-flight runs finish up to `drain_timeout`, cancel the
        rest and record them FAILED, and return when nothing is left running."""
        if self._stopping:
            return
        self._stopping = True
        self._stop_requested.set()
        main = self._main
        if main is not None and not main.done():
            # The loop leaves at its next step; a store call that hangs is given up.
            _, pending = await asyncio.wait({main}, timeout=self._settings.drain_timeout)
            if pending:
                main.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await main
        await self._runs.drain()
        self._cancel_wake()
        if main is not None:  # never started (`serve --no-engine`): its fire-now runs drained
            log.info("engine stopped", extra={"replica": self._settings.replica})

    async def kill(self) -> None:
        """Die as a killed process would (for tests): cancel the loop and every run
        without recording anything; their leases stay until they expire."""
        main = self._main
        if main is not None:
            main.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await main
        await self._runs.abandon()
        self._cancel_wake()

    # -- the loop -----------------------------------------------------------------

    async def _run(self) -> None:
        try:
            await self._passes.run(
                lambda: self._stopping, self._tick, self._sleep_until, self._failed
            )
        except asyncio.CancelledError:
            if not self._stopping:
                await self._runs.abandon()
            raise
        finally:
            self._passes.spell.reset()

    async def _failed(self, exc: Exception, retry_in: float) -> None:
        self._report_store_error(exc, retry_in)
        await wait_or_stop(self._stop_requested.wait, retry_in)

    async def _tick(self) -> datetime:
        """One pass over the store; returns when to look again at the latest."""
        began = self._clock.now()
        if not self._waker_started:
            await self._waker.start()
            self._waker_started = True
        await self._housekeeping.check_cancels()
        claimed_at = await self._claims.run(lambda: self._stopping)
        now = self._clock.now()
        await self._housekeeping.sweep(now)
        # Counted from the start of the pass: when the clock jumped while it ran (a fake
        # clock moved by a test), the deadline has already passed and we look again.
        deadline = await self._deadline(began, claimed_at)
        self._last_pass_at = began
        return deadline

    async def _deadline(self, now: datetime, claimed_at: datetime | None) -> datetime:
        settings = self._settings
        deadline = self._housekeeping.deadline(now + settings.max_poll_interval)
        if self._claims.starved:
            return deadline  # a finishing run wakes the loop
        due = await self._store.next_due_at()
        if due is None or due >= deadline:
            return deadline
        if claimed_at is not None and due <= claimed_at:
            # Due when we claimed, yet not claimed: another replica holds it. Poll.
            return deadline
        return due  # in the past when it came due during this pass: look again now

    async def _sleep_until(self, deadline: datetime) -> None:
        """Until the deadline, a notification, a freed slot, or stop."""
        if self._wake is not None and self._wake.done():
            # A change was reported while the pass ran (a cancel request, a task
            # written): it may postdate what the pass read, so look again now.
            self._wake = None
            return
        if self._wake is None:
            self._wake = asyncio.create_task(wait_for_waker(self._waker, self._settings, log))
        sleeper = asyncio.create_task(self._clock.sleep_until(deadline))
        slots = asyncio.create_task(self._slots_free.wait())
        stop = asyncio.create_task(self._stop_requested.wait())
        try:
            await asyncio.wait({self._wake, sleeper, slots, stop}, return_when="FIRST_COMPLETED")
        finally:
            for waiter in (sleeper, slots, stop):
                waiter.cancel()
        if self._wake.done():
            self._wake = None  # consumed: the pass that follows covers it
        self._slots_free.clear()

    def _slot_freed(self) -> None:
        if not self._claims.starved:
            return
        if self._claims.free >= self._claims.chunk:
            self._refill()
        elif self._refill_timer is None:
            self._refill_timer = asyncio.get_running_loop().call_later(REFILL_DELAY, self._refill)

    def _refill(self) -> None:
        if self._refill_timer is not None:
            self._refill_timer.cancel()
            self._refill_timer = None
        if self._claims.starved:
            self._claims.starved = False
            self._slots_free.set()

    def _cancel_wake(self) -> None:
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        if self._refill_timer is not None:
            self._refill_timer.cancel()
            self._refill_timer = None

    # -- logs -----------------------------------------------------------------------

    def _report_store_error(self, exc: Exception, retry_in: float) -> None:
        self._observer.store_error(exc)
        fields = {"replica": self._settings.replica, "retry_in": retry_in, "error": repr(exc)}
        if isinstance(exc, StoreUnavailable):
            log.warning("store unavailable; retrying", extra=fields)
        else:
            log.exception("engine pass failed; retrying", extra=fields)


if TYPE_CHECKING:

    def _fills_the_ports(loop: TriggerLoop) -> tuple[Engine, RunDispatcher, EngineTestHooks]:
        return loop, loop, loop
