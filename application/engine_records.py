"""Outcomes recorded in batches: one `finish_runs` transaction for many finished runs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from application.engine_settings import EngineSettings
from application.observer import EngineObserver
from application.ports import Clock, Freed, TaskStore
from domain.runs import ClaimedRun, Run, RunOutcome, lease_expired

log = logging.getLogger("scheduler.engine")

# Batches written at once. Two let the server commit one while the next is sent.
CONCURRENT_BATCHES = 2


@dataclass(slots=True)
class _Waiting:
    run: Run
    outcome: RunOutcome
    recorded: asyncio.Future[Run | None]


class OutcomeRecorder:
    """Records the outcomes of one engine's runs with `TaskStore.finish_runs`.

    A batch goes once `record_batch_size` outcomes wait, once no call is left in
    progress (nothing else can arrive before slots are freed), `record_delay` seconds
    after the first of them arrived, or as soon as a batch in flight is done, whichever
    comes first; at most `CONCURRENT_BATCHES` are in flight. A batch that fails is retried
    with a doubling backoff (`store_retry_initial` to `store_retry_max`) until it lands,
    except the outcomes whose run's lease has expired meanwhile: those are given up
    (the lost-run sweep of some replica records the run). Nothing else is ever dropped,
    short of `abandon()`.

    The slots a batch frees may start queued runs of their tasks in the same
    transaction (`TaskStore.finish_runs_starting`): those are this engine's to call,
    handed to `on_started`. Once the engine is stopping, none are started (another
    replica's finish or the task's next claim starts them).
    """

    def __init__(
        self,
        store: TaskStore,
        clock: Clock,
        settings: EngineSettings,
        observer: EngineObserver,
        on_started: Callable[[list[ClaimedRun]], None],
    ) -> None:
        self._on_started = on_started
        self._store = store
        self._clock = clock
        self._settings = settings
        self._observer = observer
        self._waiting: list[_Waiting] = []
        self._timer: asyncio.TimerHandle | None = None
        self._batches: set[asyncio.Task[None]] = set()
        self._urgent = False

    async def record(self, run: Run, outcome: RunOutcome, *, last: bool = False) -> Run | None:
        """Wait until the outcome is recorded; return the run as the store holds it, or
        None when it could not be recorded (the run vanished, its lease expired).
        `last` says that no other call is in progress: the batch goes at once."""
        loop = asyncio.get_running_loop()
        recorded: asyncio.Future[Run | None] = loop.create_future()
        waiting = _Waiting(run, outcome, recorded)
        if not self._owned([waiting], "the lease expired before the outcome was recorded"):
            return None
        self._waiting.append(waiting)
        if last or self._urgent or len(self._waiting) >= self._settings.record_batch_size:
            self._send()
        elif self._timer is None:
            self._timer = loop.call_later(self._settings.record_delay, self._send)
        return await recorded

    def hurry(self) -> None:
        """From now on send every outcome at once (the engine is stopping)."""
        self._urgent = True
        self._send()

    def abandon(self) -> None:
        """Drop everything unrecorded and stop writing (a killed process)."""
        self._cancel_timer()
        for batch in self._batches:
            batch.cancel()
        for waiting in self._waiting:
            waiting.recorded.cancel()
        self._waiting.clear()

    def _send(self) -> None:
        self._cancel_timer()
        size = self._settings.record_batch_size
        while self._waiting and len(self._batches) < CONCURRENT_BATCHES:
            batch = self._waiting[:size]
            del self._waiting[:size]
            task = asyncio.get_running_loop().create_task(self._write(batch))
            self._batches.add(task)
            task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._batches.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("recording outcomes failed", exc_info=exc)
        if self._waiting:  # they waited at least as long as that batch took
            self._send()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _write(self, batch: list[_Waiting]) -> None:
        try:
            await self._record(batch)
        finally:  # whatever happened, no run waits forever (a waiter settled stays so)
            for waiting in batch:
                _settle(waiting, None)

    async def _record(self, batch: list[_Waiting]) -> None:
        backoff = self._settings.store_retry_initial
        # A batch that waited (for company, or in a process paused past its leases)
        # writes only the outcomes whose lease still holds: the others are the sweep's.
        batch = self._owned(batch, "the lease expired before the outcome was recorded")
        while batch:
            try:
                outcomes = [(w.run.id, w.outcome) for w in batch]
                if self._urgent:  # stopping: start nothing this engine would not finish
                    freed = Freed(await self._store.finish_runs(outcomes), [])
                else:
                    now, replica = self._clock.now(), self._settings.replica
                    freed = await self._store.finish_runs_starting(outcomes, now, replica)
            except Exception as exc:
                self._observer.store_error(exc)
                batch = self._owned(batch, "outcome not recorded before the lease expired", exc)
                if batch:
                    log.warning(
                        "recording %d outcomes failed; retrying",
                        len(batch),
                        extra={"count": len(batch), "error": repr(exc), "retry_in": backoff},
                    )
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self._settings.store_retry_max)
                    # The wait may have outlived a lease: drop those before retrying.
                    batch = self._owned(batch, "outcome not recorded before the lease expired", exc)
                continue
            if freed.started:
                self._on_started(freed.started)
            recorded = {run.id: run for run in freed.runs}
            for waiting in batch:
                run = recorded.get(waiting.run.id)
                if run is None:
                    log.warning(
                        "run vanished before its outcome was recorded",
                        extra=run_fields(waiting.run),
                    )
                _settle(waiting, run)
            return

    def _owned(
        self, batch: list[_Waiting], message: str, exc: Exception | None = None
    ) -> list[_Waiting]:
        """The outcomes of `batch` whose run's lease has not expired; the others are
        given up and logged with `message` (domain.runs.lease_expired, the zombie rule)."""
        now = self._clock.now()
        kept = []
        for waiting in batch:
            if lease_expired(waiting.run, now):
                fields = run_fields(waiting.run)
                if exc is not None:
                    fields["error"] = repr(exc)
                # A warning, not an error: the zombie rule at work (a replica paused, or
                # cut off from the database, past the lease), which nothing here can mend.
                log.warning(message, extra=fields)
                _settle(waiting, None)
            else:
                kept.append(waiting)
        return kept


def _settle(waiting: _Waiting, run: Run | None) -> None:
    if not waiting.recorded.done():
        waiting.recorded.set_result(run)


def run_fields(run: Run, lateness: float | None = None) -> dict[str, object]:
    """The fields every log line about a run carries."""
    fields: dict[str, object] = {
        "task_id": str(run.task_id),
        "run_id": str(run.id),
        "scheduled_for": run.scheduled_for.isoformat(),
        "status": run.status.value,
        "manual": run.manual,
        "replica": run.replica,
    }
    if lateness is not None:
        fields["lateness"] = round(lateness, 6)
    return fields
