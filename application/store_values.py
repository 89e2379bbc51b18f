"""The values the store ports take and return: filters and keyset positions of the
listings, a batched task write, what freeing slots did."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from domain.runs import ClaimedRun, Run, RunStatus
from domain.tasks import Task


@dataclass(frozen=True, slots=True)
class TaskFilter:
    """Which tasks `TaskStore.list_tasks` returns; None means "any"."""

    enabled: bool | None = None
    tag: str | None = None
    name_prefix: str | None = None


@dataclass(frozen=True, slots=True)
class TaskPageKey:
    """Keyset position in the task listing, which is ordered by (created_at, id)."""

    created_at: datetime
    id: UUID


@dataclass(frozen=True, slots=True)
class RunPageKey:
    """Keyset position in a run history, ordered newest first by (scheduled_for, id)."""

    scheduled_for: datetime
    id: UUID


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Which runs `TaskStore.list_all_runs` returns; None means "any". `tag` matches the
    runs of the tasks that carry it now; `since` and `until` bound `scheduled_for`
    (both inclusive)."""

    status: RunStatus | None = None
    task_id: UUID | None = None
    tag: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    backfill_id: UUID | None = None


@dataclass(frozen=True, slots=True)
class TaskUpdate:
    """One write of `TaskStore.apply_tasks`, as `update_task` takes it."""

    task: Task
    expected_version: int
    reschedule: bool
    read: Task | None = None  # what a rescheduling write planned from (see update_task)


@dataclass(frozen=True, slots=True)
class TaskDelete:
    """One delete of `TaskStore.apply_tasks`: the task, only while at the version the
    caller decided on (a change made since, even one that takes it out of a prune's
    selector, must not be deleted unseen)."""

    task_id: UUID
    expected_version: int


@dataclass(frozen=True, slots=True)
class TaskKept:
    """A task that `TaskStore.apply_tasks` leaves as it is, but only while it is at the
    version the caller read: an apply that answers "unchanged" for a task it listed must
    not land beside a change (a prune's delete, say) made since its read."""

    task_id: UUID
    version: int


@dataclass(frozen=True, slots=True)
class HoldScope:
    """The stored tasks `TaskStore.hold_tasks` locks and reads: those named `names`,
    and with `prune` those carrying `tag` (every task when `tag` is None). `calendars`:
    the calendars the writes in the hold will name, locked first (as every task write
    locks them, docs/storage.md)."""

    names: frozenset[str]
    prune: bool = False
    tag: str | None = None
    calendars: frozenset[str] = frozenset()

    def covers(self, task: Task) -> bool:
        return task.name in self.names or (
            self.prune and (self.tag is None or self.tag in task.tags)
        )


@dataclass(frozen=True, slots=True)
class Freed:
    """What freeing slots did: the runs recorded (as `finish_runs` or
    `expire_lost_runs` return them) and the queued runs started in the freed slots,
    now RUNNING with a lease owned by the replica that freed them, which calls them."""

    runs: list[Run]
    started: list[ClaimedRun]


@dataclass(frozen=True, slots=True)
class EventPageKey:
    """Keyset position in the event listing, ordered newest first by (created_at, id)."""

    created_at: datetime
    id: UUID
