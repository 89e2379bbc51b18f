"""The runs one engine has in flight: each calls its target and records how it ended."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime
from uuid import UUID

from application.deadlines import TooLateToSend, deadline
from application.engine_records import OutcomeRecorder, run_fields
from application.engine_settings import EngineSettings
from application.observer import EngineObserver
from application.ports import CallProgress, Clock, Executor, TaskStore
from domain.claims import LEASE_MARGIN, lease_duration, run_instant
from domain.instants import truncate
from domain.manual_runs import REPLICA_BUSY
from domain.overlap import CANCELLED_BY_REQUEST
from domain.runs import ClaimedRun, Run, RunOutcome, RunStatus, lease_expired, lease_worn

__all__ = ["CANCEL_ERROR", "DRAIN_ERROR", "LEASE_ERROR", "RunRunner", "run_fields"]

log = logging.getLogger("scheduler.engine")

CANCEL_ERROR = CANCELLED_BY_REQUEST
DRAIN_ERROR = "scheduler stopped before the run finished (drain timeout)"
LEASE_ERROR = "the run outlived its lease and was stopped"


class RunRunner:
    """Runs claimed runs as asyncio tasks, under the engine's ceiling.

    A run is cancellable (with a reason that becomes its recorded outcome) from
    dispatch until its call returns; recording is never interrupted by a cancel with a
    reason, only by `abandon()`, which plays a killed process. Outcomes are recorded in
    batches by an `OutcomeRecorder`; a run holds its slot until its outcome is recorded.
    """

    def __init__(
        self,
        store: TaskStore,
        executor: Executor,
        clock: Clock,
        settings: EngineSettings,
        observer: EngineObserver,
        on_done: Callable[[], None],
    ) -> None:
        self._store = store
        self._executor = executor
        self._clock = clock
        self._settings = settings
        self._observer = observer
        self._on_done = on_done
        self._semaphore = asyncio.Semaphore(settings.max_concurrent_runs)
        self._tasks: dict[UUID, asyncio.Task[None]] = {}
        self._cancellable: set[UUID] = set()
        self._reasons: dict[UUID, tuple[RunStatus, str]] = {}
        self._recorder = OutcomeRecorder(store, clock, settings, observer, self.dispatch_all)

    def __len__(self) -> int:
        return len(self._tasks)

    def cancellable(self) -> list[UUID]:
        """Runs whose call is still in progress (or waiting for a slot)."""
        return list(self._cancellable)

    def dispatch(self, claimed: ClaimedRun) -> None:
        run = claimed.run
        if run.status is RunStatus.QUEUED:  # it starts when a slot frees, on some engine
            log.info("run queued", extra=run_fields(run, self._lateness(claimed)))
            return
        if not claimed.should_call:
            log.info("run not called", extra=run_fields(run, self._lateness(claimed)))
            self._observer.run_finished(run, 0.0)
            return
        if run.id in self._tasks:
            return
        self._cancellable.add(run.id)
        self._tasks[run.id] = asyncio.create_task(self._execute(claimed), name=f"run {run.id}")
        self._observer.in_flight(len(self._tasks))

    def busy(self) -> str | None:
        """Why a run dispatched now would wait for one of this process's call slots, or
        None when one is free."""
        if self._semaphore.locked():
            return REPLICA_BUSY.format(limit=self._settings.max_concurrent_runs)
        return None

    def dispatch_all(self, started: list[ClaimedRun]) -> None:
        """Run queued runs the store started on this engine (in freed slots)."""
        for claimed in started:
            self.dispatch(claimed)

    def cancel(self, run_id: UUID, status: RunStatus, error: str) -> bool:
        """Stop a run's call and record it with `status` and `error`. False when the
        run is not here or its call already ended."""
        task = self._tasks.get(run_id)
        if task is None or run_id not in self._cancellable or run_id in self._reasons:
            return False
        self._reasons[run_id] = (status, error)
        task.cancel()
        return True

    async def drain(self) -> None:
        """Let runs finish up to the drain timeout, then cancel the rest as FAILED."""
        self._recorder.hurry()
        if not self._tasks:
            return
        log.info("draining %d runs", len(self._tasks), extra={"count": len(self._tasks)})
        await asyncio.wait(set(self._tasks.values()), timeout=self._settings.drain_timeout)
        if not self._tasks:
            return
        log.warning(
            "drain timeout: cancelling %d runs", len(self._tasks), extra={"count": len(self._tasks)}
        )
        for run_id in list(self._cancellable):
            self.cancel(run_id, RunStatus.FAILED, DRAIN_ERROR)
        await asyncio.wait(set(self._tasks.values()), timeout=self._settings.record_grace)
        if self._tasks:
            log.error(
                "runs left unrecorded at stop; the lost-run sweep will fail them",
                extra={"count": len(self._tasks)},
            )
            await self.abandon()

    async def abandon(self) -> None:
        """Cancel every run without recording anything (a killed process)."""
        self._reasons.clear()
        self._recorder.abandon()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- one run ------------------------------------------------------------------

    async def _execute(self, claimed: ClaimedRun) -> None:
        run = claimed.run
        began = time.perf_counter()
        try:
            called = await self._call(claimed)
            if called is None:
                return
            outcome, lateness, run = called
            recorded = await self._recorder.record(run, outcome, last=not self._cancellable)
            duration = time.perf_counter() - began
            final = recorded or run.model_copy(update=dict(outcome))
            # A failed run is a warning: SCHEDULER_LOG_LEVEL=WARNING keeps the failures. A
            # cancelled one was asked for (a cancel, `replace`, a pause): not a warning.
            level = logging.WARNING if final.status is RunStatus.FAILED else logging.INFO
            if log.isEnabledFor(level):
                fields = run_fields(final, lateness)
                fields["duration"] = round(duration, 6)
                fields["attempts"] = final.attempts
                fields["http_status"] = final.http_status
                fields["error"] = final.error
                fields["recorded"] = recorded is not None
                # Not recorded (the recorder said why): the call's result, not the run's.
                message = "run %s" if recorded is not None else "call %s; outcome not recorded"
                log.log(level, message, final.status.value, extra=fields)
            self._observer.run_finished(final, duration)
        finally:
            self._tasks.pop(run.id, None)
            self._cancellable.discard(run.id)
            self._reasons.pop(run.id, None)
            self._observer.in_flight(len(self._tasks))
            self._on_done()

    async def _call(self, claimed: ClaimedRun) -> tuple[RunOutcome, float, Run] | None:
        """The run's outcome, lateness and the run as its outcome is to be recorded (its
        lease renewed, when it waited for a call slot); None when it was not called
        because its lease had expired before its call could start (a process paused or
        starved past its lease): the lost-run sweep records it, and nothing is written
        here.

        A call stopped by a cancel (with a reason) or by the lease's budget is recorded
        with what the executor reported into `progress` until then: the attempts begun
        (each counted before anything of it is sent), and the answer of the last one
        that ended."""
        task, run = claimed.task, claimed.run
        started_at: datetime | None = None
        lateness = 0.0
        progress = CallProgress()
        try:
            queued = self._semaphore.locked()  # every call slot taken: it waits for one
            async with self._semaphore:
                started_at = self._clock.now()
                if lease_expired(run, started_at):
                    log.error("run not called: its lease expired first", extra=run_fields(run))
                    return None
                if queued and lease_worn(run, lease_duration(task.target), started_at):
                    renewed = await self._renew(claimed, started_at)
                    if renewed is None:
                        return None
                    claimed = ClaimedRun(task=task, run=renewed)
                    run = renewed
                lateness = self._lateness(claimed, started_at)
                self._observer.run_started(claimed, lateness)
                # An answer that came while this process was frozen past the budget is
                # read before the budget stops the call, but no request is sent past it
                # by the clock (application/deadlines.py).
                budget = self._budget(claimed, started_at)
                async with deadline(budget, bounds_sends=True):
                    outcome = await self._executor.execute(task, run, task.last_run_at, progress)
        except asyncio.CancelledError:
            reason = self._reasons.get(run.id)
            if reason is None:
                raise
            _uncancel()
            outcome = self._ended(*reason, started_at, progress)
        except (TimeoutError, TooLateToSend):
            outcome = self._ended(RunStatus.FAILED, LEASE_ERROR, started_at, progress)
        except Exception as exc:
            log.exception("executor raised", extra=run_fields(run, lateness))
            error = f"executor error ({type(exc).__name__})"
            outcome = self._ended(RunStatus.FAILED, error, started_at, progress)
        else:
            reason = self._reasons.get(run.id)
            if reason is not None:  # the executor swallowed the cancel
                _uncancel()
                outcome = self._ended(*reason, started_at, progress)
        finally:
            self._cancellable.discard(run.id)
        return outcome, lateness, run

    async def _renew(self, claimed: ClaimedRun, now: datetime) -> Run | None:
        """The run with its lease renewed from `now`, as long as a fresh claim's: a run
        that waited for one of this process's call slots (an `allow_all` backfill's runs
        beyond the ceiling) would else start with what its wait left of its lease, and
        those after it with none. None when the lease no longer holds (not called). A
        store that fails leaves the lease as it was: the call goes on within it."""
        run = claimed.run
        try:
            renewed = await self._store.renew_lease(
                run, now, truncate(now) + lease_duration(claimed.task.target)
            )
        except Exception:
            log.warning(
                "the lease of a run that waited for a call slot was not renewed",
                exc_info=True,
                extra=run_fields(run),
            )
            return run
        if renewed is None:
            log.error("run not called: its lease expired first", extra=run_fields(run))
        return renewed

    def _ended(
        self, status: RunStatus, error: str, started_at: datetime | None, progress: CallProgress
    ) -> RunOutcome:
        """The outcome of a call the engine stopped (or whose executor raised): the
        reason, with what the call had made until then."""
        return RunOutcome(
            status=status,
            attempts=progress.attempts,
            http_status=progress.http_status,
            response_excerpt=progress.response_excerpt,
            error=error,
            started_at=started_at,
            finished_at=self._clock.now(),
        )

    def _lateness(self, claimed: ClaimedRun, now: datetime | None = None) -> float:
        """Seconds from when the run was due to `now`: a scheduled run from its jittered
        instant, a manual run from when it was fired, a backfilled run from when the
        backfill made it (its occurrence is in the past on purpose: counted from there,
        every backfill raised the lateness alarm of docs/operations.md)."""
        run = claimed.run
        if run.backfill_id is not None:
            due: datetime | None = run.claimed_at
        elif run.manual:
            due = run.scheduled_for
        else:
            due = run_instant(claimed.task, run.scheduled_for)
        return ((now or self._clock.now()) - (due or run.scheduled_for)).total_seconds()

    def _budget(self, claimed: ClaimedRun, started_at: datetime) -> float:
        """Seconds a call may take: until its lease expires less half the lease margin,
        so a call that hangs past every timeout (or that started late, after waiting for
        a slot) ends before another replica may take its slot."""
        run = claimed.run
        if run.lease_expires_at is None:
            return (lease_duration(claimed.task.target) - LEASE_MARGIN / 2).total_seconds()
        return (run.lease_expires_at - started_at - LEASE_MARGIN / 2).total_seconds()


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        task.uncancel()
