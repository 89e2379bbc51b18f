"""Runs: one record per occurrence the scheduler claimed (or a manual fire)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator

from domain.instants import truncate
from domain.tasks import Task

RESPONSE_EXCERPT_LIMIT = 1024


class RunStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    MISSED = "missed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    QUEUED = "queued"  # claimed, waiting for a slot, not called yet (docs/policies.md)

    @property
    def finished(self) -> bool:
        return self is not RunStatus.RUNNING and self is not RunStatus.QUEUED


REPLICA_LOST = "replica lost"


class Run(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: UUID
    task_id: UUID
    scheduled_for: datetime
    coalesced: int = Field(default=1, ge=1)
    claimed_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    lease_expires_at: datetime | None = None
    status: RunStatus
    manual: bool = False
    attempts: int = 0
    http_status: int | None = None
    response_excerpt: str | None = None
    error: str | None = None
    replica: str
    backfill_id: UUID | None = Field(
        default=None, description="the backfill that made this run; null for other runs"
    )


class RunOutcome(BaseModel):
    """How a run ended, as the executor (or the engine, on cancel or shutdown) saw it."""

    model_config = ConfigDict(frozen=True)

    status: RunStatus
    attempts: int = 0
    http_status: int | None = None
    response_excerpt: str | None = Field(default=None, max_length=RESPONSE_EXCERPT_LIMIT)
    error: str | None = None
    started_at: datetime | None = None
    finished_at: datetime

    @field_validator("started_at", "finished_at")
    @classmethod
    def _whole_seconds(cls, instant: datetime | None) -> datetime | None:
        # Executors read the clock to the microsecond; a run's start and end are stored
        # in whole seconds like every other instant (truncated, never rounded up).
        return None if instant is None else truncate(instant)


@dataclass(frozen=True, slots=True)
class ClaimedRun:
    """A run a replica now owns, with the task as it was when claimed."""

    task: Task
    run: Run

    @property
    def should_call(self) -> bool:
        return self.run.status is RunStatus.RUNNING


def occurrence_key(task_id: UUID, occurrence: datetime) -> str:
    """The `Idempotency-Key` of every call for one occurrence of a task (docs/api.md,
    "Calling the target"): "<task id>:<occurrence as Unix seconds>", the same on every
    attempt and every replica."""
    return f"{task_id}:{int(occurrence.timestamp())}"


def idempotency_key(run: Run) -> str:
    """The `Idempotency-Key` of every call of `run`: its occurrence's key, or
    "<task id>:<run id>" for a manual run (each manual fire is a call of its own)."""
    if run.manual:
        return f"{run.task_id}:{run.id}"
    return occurrence_key(run.task_id, run.scheduled_for)


# How much of its lease a run may have used before its call starts and still start on it
# (a claim's budget covers every attempt and retry wait, plus half the margin, 15 s): past
# this, it waited for a call slot of its replica, and its lease is renewed first.
LEASE_WORN = timedelta(seconds=5)


def lease_worn(run: Run, lease: timedelta, now: datetime) -> bool:
    """Whether `run`, starting its call at `now`, has used LEASE_WORN or more of a lease
    of length `lease` (what a fresh claim would hold, less what it holds)."""
    return run.lease_expires_at is not None and now + lease - run.lease_expires_at >= LEASE_WORN


def lease_expired(run: Run, now: datetime) -> bool:
    """Whether `run`'s replica has lost its slot at `now` (docs/api.md "Run", the zombie
    rule): from its `lease_expires_at` on, the run belongs to the lost-run sweep, so its
    replica may neither start its call nor record its outcome (a paused replica that
    wakes late acts on nothing it no longer holds). A run without a lease holds none."""
    return run.lease_expires_at is not None and now >= run.lease_expires_at
