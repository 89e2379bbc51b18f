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
from uuid import UUID

from domain.claims import NOT_CALLED
from domain.runs import Run, RunStatus


# The texts the in-memory store records on runs that were not called.
def lease_lock_key(schema: str, task_id: UUID) -> int:
    """The pg_advisory_xact_lock key under which a task's leases are counted and taken:
    the same on every replica, distinct per schema, a signed 64-bit integer."""
    digest = hashlib.blake2b(f"{schema}:lease:{task_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@dataclass(slots=True)
class ClaimBatch:
    """The columns of one `record_claims` statement: a row per task, with its run."""

    claimed_at: datetime
    task_ids: list[UUID] = field(default_factory=list)
    next_fire_at: list[datetime | None] = field(default_factory=list)
    next_run_at: list[datetime | None] = field(default_factory=list)
    run_ids: list[UUID | None] = field(default_factory=list)
    scheduled_for: list[datetime | None] = field(default_factory=list)
    coalesced: list[int | None] = field(default_factory=list)
    status: list[str | None] = field(default_factory=list)
    lease_expires_at: list[datetime | None] = field(default_factory=list)

    def add(
        self,
        task_id: UUID,
        next_fire_at: datetime | None,
        next_run_at: datetime | None,
        run: Run | None = None,
    ) -> None:
        """Advance a task to `next_fire_at`/`next_run_at`, recording `run` (made by
        `new_run` at this batch's `claimed_at`) when there is one."""
        self.task_ids.append(task_id)
        self.next_fire_at.append(next_fire_at)
        self.next_run_at.append(next_run_at)
        if run is None:
            self.run_ids.append(None)
            self.scheduled_for.append(None)
            self.coalesced.append(None)
            self.status.append(None)
            self.lease_expires_at.append(None)
        else:
            self.run_ids.append(run.id)
            self.scheduled_for.append(run.scheduled_for)
            self.coalesced.append(run.coalesced)
            self.status.append(run.status.value)
            self.lease_expires_at.append(run.lease_expires_at)

    def __bool__(self) -> bool:
        return bool(self.task_ids)

    def params(self, replica: str) -> dict[str, Any]:
        return {
            "task_ids": self.task_ids,
            "next_fire_at": self.next_fire_at,
            "next_run_at": self.next_run_at,
            "run_ids": self.run_ids,
            "scheduled_for": self.scheduled_for,
            "coalesced": self.coalesced,
            "status": self.status,
            "lease_expires_at": self.lease_expires_at,
            "claimed_at": self.claimed_at,
            "missed_error": NOT_CALLED[RunStatus.MISSED],
            "skipped_error": NOT_CALLED[RunStatus.SKIPPED],
            "replica": replica,
        }


def manual_run_params(run: Run) -> dict[str, Any]:
    """The parameters of `record_manual_run`."""
    return {
        "id": run.id,
        "task_id": run.task_id,
        "scheduled_for": run.scheduled_for,
        "coalesced": run.coalesced,
        "claimed_at": run.claimed_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "lease_expires_at": run.lease_expires_at,
        "status": run.status.value,
        "error": run.error,
        "replica": run.replica,
    }
