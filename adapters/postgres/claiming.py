"""Turning locked task rows into runs and leases, a batch at a time.

The decisions are the domain's (`claim`, `resolve_status`, `lease_duration`); this
module only gathers them into the arrays that `record_claims` unnests, so that a batch
of any size is written by one statement.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from domain.claims import lease_duration, truncate
from domain.runs import Run, RunStatus
from domain.tasks import Task

# The texts the in-memory store records on runs that were not called.
NOT_CALLED = {
    RunStatus.MISSED: "claimed later than misfire_grace_seconds after its time; not called",
    RunStatus.SKIPPED: "max_running_instances runs were in flight; not called",
}


def lease_lock_key(schema: str, task_id: UUID) -> int:
    """The pg_advisory_xact_lock key under which a task's leases are counted and taken:
    the same on every replica, distinct per schema, a signed 64-bit integer."""
    digest = hashlib.blake2b(f"{schema}:lease:{task_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def new_run(
    task: Task,
    now: datetime,
    replica: str,
    status: RunStatus,
    scheduled_for: datetime,
    coalesced: int,
    *,
    manual: bool = False,
) -> Run:
    """A run claimed at `now`: RUNNING with a lease, or already finished when not called."""
    claimed_at = truncate(now)
    running = status is RunStatus.RUNNING
    return Run(
        id=uuid4(),
        task_id=task.id,
        scheduled_for=scheduled_for,
        coalesced=coalesced,
        claimed_at=claimed_at,
        started_at=claimed_at if running else None,
        finished_at=None if running else claimed_at,
        lease_expires_at=claimed_at + lease_duration(task.target) if running else None,
        status=status,
        manual=manual,
        error=NOT_CALLED.get(status),
        replica=replica,
    )


@dataclass(slots=True)
class ClaimBatch:
    """The columns of one `record_claims` statement."""

    task_ids: list[UUID] = field(default_factory=list)
    next_fire_at: list[datetime | None] = field(default_factory=list)
    next_run_at: list[datetime | None] = field(default_factory=list)
    last_run_at: list[datetime | None] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)

    def advance(
        self,
        task_id: UUID,
        next_fire_at: datetime | None,
        next_run_at: datetime | None,
        last_run_at: datetime | None = None,
    ) -> None:
        self.task_ids.append(task_id)
        self.next_fire_at.append(next_fire_at)
        self.next_run_at.append(next_run_at)
        self.last_run_at.append(last_run_at)

    def __bool__(self) -> bool:
        return bool(self.task_ids or self.runs)

    def params(self, replica: str, *, manual: bool) -> dict[str, Any]:
        runs = self.runs
        leased = [run for run in runs if run.lease_expires_at is not None]
        return {
            "task_ids": self.task_ids,
            "next_fire_at": self.next_fire_at,
            "next_run_at": self.next_run_at,
            "last_run_at": self.last_run_at,
            "manual": manual,
            "replica": replica,
            "run_ids": [run.id for run in runs],
            "run_task_ids": [run.task_id for run in runs],
            "scheduled_for": [run.scheduled_for for run in runs],
            "coalesced": [run.coalesced for run in runs],
            "claimed_at": [run.claimed_at for run in runs],
            "started_at": [run.started_at for run in runs],
            "finished_at": [run.finished_at for run in runs],
            "lease_expires_at": [run.lease_expires_at for run in runs],
            "status": [run.status.value for run in runs],
            "errors": [run.error for run in runs],
            "lease_run_ids": [run.id for run in leased],
            "lease_task_ids": [run.task_id for run in leased],
            "lease_expires": [run.lease_expires_at for run in leased],
        }
