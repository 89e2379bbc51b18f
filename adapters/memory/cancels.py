"""Cancelling runs in memory: asking a run to stop (a queued one is cancelled at once),
and reading which runs were asked and why."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from uuid import UUID

from adapters.memory.state import MemoryStoreBase
from domain.errors import (
    RunNotRunning,
)
from domain.overlap import (
    CANCELLED_BY_REQUEST,
)
from domain.runs import Run, RunStatus


class Cancels(MemoryStoreBase):
    """The cancel requests of `InMemoryTaskStore`."""

    async def request_cancel(self, run_id: UUID, reason: str | None = None) -> Run:
        async with self._lock:
            run = self._run(run_id)
            if run.status is RunStatus.QUEUED:
                cancelled = self._slots.cancel_queued(
                    run_id, datetime.now(UTC), reason or CANCELLED_BY_REQUEST
                )
                self.backfills.settle([cancelled])  # it may have been its backfill's last
                return cancelled
            if run.status is not RunStatus.RUNNING:
                raise RunNotRunning(run_id, run.status.value)
            lease = self._leases.get(run_id)
            if lease is not None and not lease.cancel_requested:  # the first reason stands
                lease.cancel_requested = True
                lease.cancel_reason = reason
        self.notifier.notify()
        return run

    async def cancel_requested(self, run_ids: Collection[UUID]) -> set[UUID]:
        leases = self._leases
        return {
            run_id
            for run_id in run_ids
            if (lease := leases.get(run_id)) is not None and lease.cancel_requested
        }

    async def cancel_reasons(self, run_ids: Collection[UUID]) -> dict[UUID, str | None]:
        leases = self._leases
        return {
            run_id: lease.cancel_reason
            for run_id in run_ids
            if (lease := leases.get(run_id)) is not None and lease.cancel_requested
        }
