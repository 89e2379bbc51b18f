"""The `Engine` port on APScheduler 4 (docs/adr/0002-apscheduler-engine-swap.md).

APScheduler decides when: every task with a next occurrence is a schedule (id = task
id) on a private in-memory data store, triggered by the task's own trigger
(`DomainTrigger`), and every schedule's job is `EXECUTE(task_id=...)`, a claim pass
through the store. The rest is the application's: the store claims (leases, misfire,
coalescing, run history), the `RunRunner` calls targets and records outcomes, exactly
as under the native loop.

A small loop of ours on the engine's clock ("tending") keeps APScheduler in step with
the task rows: it resyncs the schedules at start, whenever the waker reports a change
and every `max_poll_interval`, and it checks cancel requests and runs the lost-run and
retention sweeps, which APScheduler has no notion of.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from apscheduler import AsyncScheduler, RunState
from apscheduler.executors.async_ import AsyncJobExecutor

from adapters.apscheduler.passes import ClaimPasses
from adapters.apscheduler.sync import EXECUTE, resync
from adapters.apscheduler.triggers import ClockBridge
from application.calendars import SchedulerStore
from application.claim_pass import PassLoop, wait_for_waker, wait_or_stop
from application.engine_runs import RunRunner
from application.engine_settings import EngineSettings
from application.housekeeping import Housekeeping
from application.observer import EngineObserver, NoopObserver
from application.ports import Clock, Engine, EngineTestHooks, Executor, RunDispatcher, Waker
from domain.errors import StoreUnavailable
from domain.runs import ClaimedRun

log = logging.getLogger("scheduler.engine.apscheduler")

# Real seconds before a resync retries schedules APScheduler was processing.
DEFERRED_RETRY = 0.05


class ClaimPassFailed(Exception):
    """A claim pass the engine owed failed; the tending loop backs off and retries."""


class APSchedulerEngine:
    """Fills the `Engine` and `RunDispatcher` ports with an `apscheduler.AsyncScheduler`;
    takes the same arguments as the native `TriggerLoop`."""

    def __init__(
        self,
        store: SchedulerStore,
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
        self._passes = ClaimPasses(store, clock, settings, observer, self._runs, self._owe)
        self._house = Housekeeping(store, settings, observer, self._runs)
        self._bridge = ClockBridge(clock)
        self._scheduler: AsyncScheduler | None = None
        self._main: asyncio.Task[None] | None = None
        self._tending: asyncio.Task[None] | None = None
        self._wake: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._release = asyncio.Event()
        self._kick = asyncio.Event()
        self._stopping = False
        self._tending_passes = PassLoop(settings)
        self._waker_started = False
        self._owed = False
        self._resync_wanted = True
        self._retry_soon = False
        self._shift: timedelta | None = None
        self._next_resync: datetime | None = None

    @property
    def settings(self) -> EngineSettings:
        return self._settings

    @property
    def scheduler(self) -> AsyncScheduler | None:
        """The running APScheduler (diagnostics and tests), None when not running."""
        return self._scheduler

    @property
    def stalled_for(self) -> float | None:
        return self._tending_passes.stalled_for

    @property
    def alive(self) -> bool:
        """APScheduler running, its passes succeeding or failing for less than
        FAILING_GRACE (application/claim_pass.py)."""
        scheduler, main = self._scheduler, self._main
        return (
            main is not None
            and not main.done()
            and scheduler is not None
            and scheduler.state is RunState.started
            and self._tending_passes.healthy
            and not self._passes.spell.too_long
            and not self._stopping
        )

    @property
    def in_flight(self) -> int:
        return len(self._runs)

    @property
    def last_pass_at(self) -> datetime | None:
        """The clock's time of the latest instant at which everything due was claimed."""
        return self._passes.covered_at

    async def start(self) -> None:
        """Start APScheduler and the tending loop; returns at once. Idempotent."""
        if self._main is not None:
            return
        replica = self._settings.replica
        self._main = asyncio.create_task(self._run_scheduler(), name=f"apscheduler {replica}")
        self._tending = asyncio.create_task(self._tend_loop(), name=f"tending {replica}")
        log.info("engine started", extra={"replica": replica, "engine": "apscheduler"})

    def dispatch(self, claimed: ClaimedRun) -> None:
        """Run a claimed run (a manual fire) on this engine, under its ceiling."""
        self._runs.dispatch(claimed)

    def busy(self) -> str | None:
        """Why a manual fire would wait for a call slot of this process (see RunRunner)."""
        return self._runs.busy()

    async def stop(self) -> None:
        """Stop firing, let a claim pass in progress end (its runs are dispatched), stop
        APScheduler, then drain in-flight runs as the native loop does."""
        if self._stopping:
            return
        self._stopping = True
        self._passes.closed = True
        self._kick.set()
        timeout = self._settings.drain_timeout
        await _finish(self._tending, timeout)
        try:
            await asyncio.wait_for(self._passes.wait_idle(), timeout)
        except TimeoutError:
            log.error("a claim pass outlived the drain timeout", extra=self._fields())
        self._release.set()
        await _finish(self._main, timeout)
        await self._runs.drain()
        self._cancel_wake()
        log.info("engine stopped", extra=self._fields())

    async def kill(self) -> None:
        """Die as a killed process would (for tests): nothing is recorded, leases stay."""
        self._passes.closed = True
        for task in (self._tending, self._main):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self._runs.abandon()
        self._cancel_wake()

    # -- APScheduler ------------------------------------------------------------------

    async def _run_scheduler(self) -> None:
        scheduler = AsyncScheduler(
            identity=self._settings.replica,
            job_executors={"async": AsyncJobExecutor()},
            max_concurrent_jobs=self._settings.max_concurrent_runs,
        )
        try:
            async with scheduler:
                await scheduler.configure_task(
                    EXECUTE, func=self._execute, max_running_jobs=None, misfire_grace_time=None
                )
                await scheduler.start_in_background()
                self._scheduler = scheduler
                self._ready.set()
                await self._release.wait()
        except Exception:
            log.exception("APScheduler stopped with an error", extra=self._fields())
        finally:
            self._scheduler = None

    async def _execute(self, task_id: str) -> None:
        """The job of every schedule: a claim pass (see `ClaimPasses`)."""
        await self._passes.request(task_id)

    # -- tending ----------------------------------------------------------------------

    async def _tend_loop(self) -> None:
        if not await self._scheduler_ready():
            return
        await self._tending_passes.run(
            lambda: self._stopping, self._tend, self._sleep_until, self._failed
        )

    async def _failed(self, exc: Exception, retry_in: float) -> None:
        self._report(exc, retry_in)
        await wait_or_stop(self._until_stopping, retry_in)

    async def _scheduler_ready(self) -> bool:
        assert self._main is not None
        ready = asyncio.create_task(self._ready.wait())
        await asyncio.wait({ready, self._main}, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        return self._ready.is_set() and not self._main.done()

    async def _tend(self) -> datetime:
        """One round of tending; returns when to look again at the latest."""
        began = self._clock.now()
        if not self._waker_started:
            await self._waker.start()
            self._waker_started = True
        await self._house.check_cancels()
        shift = self._bridge.shift()
        if self._resync_wanted or shift != self._shift or began >= (self._next_resync or began):
            self._resync_wanted = False
            await self._resync(shift)
            self._next_resync = began + self._settings.max_poll_interval
        if self._owed:
            self._owed = False
            await self._passes.request("owed")
            if self._passes.failing:
                self._owed = True
                raise ClaimPassFailed("the claim pass failed")
        now = self._clock.now()
        await self._house.sweep(now)
        due = await self._store.next_due_at()
        if due is None or due > began:
            self._passes.note_covered(began)  # nothing due at `began` is left unclaimed
        # Counted from the start of the round, as the native loop does: when the clock
        # jumped while it ran (a fake clock moved by a test), that deadline has passed
        # and the next round, at once, covers the new instant.
        deadline = self._house.deadline(began + self._settings.max_poll_interval)
        # Under a clock that is not the wall clock, APScheduler cannot see that instant
        # arrive; a resync then re-arms the schedule on the new shift.
        if shift and due is not None and now < due < deadline:
            deadline = due
        return deadline

    async def _resync(self, shift: timedelta) -> None:
        scheduler = self._scheduler
        if scheduler is None:
            return
        changes = await resync(self._store, scheduler, shift)
        self._shift = shift
        if changes.deferred:
            self._resync_wanted = self._retry_soon = True
        if changes:
            log.debug(
                "schedules resynced",
                extra=self._fields()
                | {"armed": len(changes.arm), "paused": len(changes.pause)}
                | {"removed": len(changes.remove), "deferred": changes.deferred},
            )

    async def _sleep_until(self, deadline: datetime) -> None:
        """Until the deadline, a notification, a kick (owed pass, stop) or a retry."""
        if self._wake is not None and self._wake.done():
            # A change was reported while the round ran: it may postdate what the round
            # read (a cancel request, a task written), so look again now.
            self._wake = None
            self._resync_wanted = True
            return
        if self._wake is None:
            self._wake = asyncio.create_task(wait_for_waker(self._waker, self._settings, log))
        mine = {
            asyncio.create_task(self._clock.sleep_until(deadline)),
            asyncio.create_task(self._kick.wait()),
        }
        if self._retry_soon:
            mine.add(asyncio.create_task(asyncio.sleep(DEFERRED_RETRY)))
        try:
            await asyncio.wait(mine | {self._wake}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in mine:
                waiter.cancel()
        if self._wake.done():
            self._wake = None  # consumed: the round that follows covers it
            self._resync_wanted = True
        self._kick.clear()
        self._retry_soon = False

    async def _until_stopping(self) -> None:
        while not self._stopping:
            await self._kick.wait()
            self._kick.clear()

    # -- signals ----------------------------------------------------------------------

    def _owe(self) -> None:
        """A claim pass is owed (one failed, or runs were starved of slots)."""
        self._owed = True
        self._kick.set()

    def _slot_freed(self) -> None:
        if self._passes.starved:
            self._passes.starved = False
            self._owe()

    def _cancel_wake(self) -> None:
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None

    def _fields(self) -> dict[str, object]:
        return {"replica": self._settings.replica, "engine": "apscheduler"}

    def _report(self, exc: Exception, retry_in: float) -> None:
        if not isinstance(exc, ClaimPassFailed):  # the pass reported its own error
            self._observer.store_error(exc)
        fields = self._fields() | {"retry_in": retry_in, "error": repr(exc)}
        if isinstance(exc, StoreUnavailable | ClaimPassFailed):
            log.warning("engine store call failed; retrying", extra=fields)
        else:
            log.exception("tending failed; retrying", extra=fields)


async def _finish(task: asyncio.Task[None] | None, seconds: float) -> None:
    """Wait up to `seconds` for `task` to end, then cancel it."""
    if task is None or task.done():
        return
    _, pending = await asyncio.wait({task}, timeout=seconds)
    if pending:
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


if TYPE_CHECKING:

    def _fills_the_ports(
        engine: APSchedulerEngine,
    ) -> tuple[Engine, RunDispatcher, EngineTestHooks]:
        return engine, engine, engine
