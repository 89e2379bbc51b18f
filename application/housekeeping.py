"""What an engine does besides claiming: cancel requests for the runs it has in flight,
the lost-run sweep and the retention sweep, each on the engine's clock and intervals.
The native loop and the APScheduler adapter share it."""

from __future__ import annotations

import logging
from datetime import datetime

from application.engine_runs import CANCEL_ERROR, RunRunner, run_fields
from application.engine_settings import EngineSettings
from application.observer import EngineObserver
from application.ports import TaskStore
from domain.runs import RunStatus

log = logging.getLogger("scheduler.engine")


class Housekeeping:
    def __init__(
        self, store: TaskStore, settings: EngineSettings, observer: EngineObserver, runs: RunRunner
    ) -> None:
        self._store = store
        self._settings = settings
        self._observer = observer
        self._runs = runs
        self.next_lost_sweep: datetime | None = None
        self.next_retention_sweep: datetime | None = None

    async def check_cancels(self) -> None:
        """Stop the runs of this engine that someone asked to cancel."""
        cancellable = self._runs.cancellable()
        if cancellable:
            reasons = await self._store.cancel_reasons(cancellable)
            for run_id, reason in reasons.items():
                self._runs.cancel(run_id, RunStatus.CANCELLED, reason or CANCEL_ERROR)

    async def sweep(self, now: datetime) -> None:
        """Fail lost runs and delete old runs (by age and by their task's
        `history_limit`) and task versions, each when its interval has passed."""
        settings = self._settings
        if self.next_lost_sweep is None or now >= self.next_lost_sweep:
            freed = await self._store.expire_lost_runs_starting(now, settings.replica)
            for run in freed.runs:
                log.warning("run lost with its replica", extra=run_fields(run))
                self._observer.run_finished(run, 0.0)
            # Queued runs started in the slots the lost runs held: this engine calls them.
            self._runs.dispatch_all(freed.started)
            if settings.stalled_transaction_timeout:
                await self._store.end_stalled_transactions(settings.stalled_transaction_timeout)
            self.next_lost_sweep = now + settings.lost_run_sweep_interval
        if self.next_retention_sweep is None or now >= self.next_retention_sweep:
            cutoff = now - settings.run_retention
            # Whole weeks first (a partition dropped), then what is left row by row.
            deleted = await self._store.drop_runs_before(cutoff, now)
            for _ in range(settings.retention_max_batches):
                count = await self._store.delete_runs_before(cutoff, settings.retention_batch_size)
                deleted += count
                if count < settings.retention_batch_size:
                    break
            if deleted:
                log.info("old runs deleted", extra={"count": deleted, "cutoff": cutoff})
            # Runs past their task's history_limit, whatever their age.
            over = 0
            for _ in range(settings.retention_max_batches):
                count = await self._store.delete_runs_over_limit(settings.retention_batch_size)
                over += count
                if count < settings.retention_batch_size:
                    break
            if over:
                log.info("runs past their task's history_limit deleted", extra={"count": over})
            # Task history is kept as long as runs are (what was in force at the cutoff stays).
            versions = 0
            for _ in range(settings.retention_max_batches):
                count = await self._store.delete_history_before(
                    cutoff, settings.retention_batch_size
                )
                versions += count
                if count < settings.retention_batch_size:
                    break
            if versions:
                log.info("old task versions deleted", extra={"count": versions, "cutoff": cutoff})
            self.next_retention_sweep = now + settings.retention_sweep_interval

    def deadline(self, latest: datetime) -> datetime:
        """The earlier of `latest` and the next sweep."""
        for sweep in (self.next_lost_sweep, self.next_retention_sweep):
            if sweep is not None and sweep < latest:
                latest = sweep
        return latest
