"""The storage ports: `TaskStore` (tasks, runs, leases, task history) and `EventStore`
(the outbox of events). Adapters fill them; docstrings are the contract."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Protocol
from uuid import UUID

from application.store_values import (
    EventPageKey,
    Freed,
    HoldScope,
    RunFilter,
    RunPageKey,
    TaskDelete,
    TaskFilter,
    TaskKept,
    TaskPageKey,
    TaskUpdate,
)
from domain.calendars import StoredCalendar
from domain.events import Delivery, Event, EventStatus, Outgoing, Progress
from domain.history import TaskVersion
from domain.runs import ClaimedRun, Run, RunOutcome, RunStatus
from domain.tasks import Task


class TaskHold(Protocol):
    """The tasks a `TaskStore.hold_tasks` block holds: read under their locks, and
    written in the same transaction, so that nothing changes them between the read and
    the write."""

    @property
    def tasks(self) -> list[Task]:
        """The stored tasks of the hold's scope, as they are while it lasts."""
        ...

    async def calendars_named(self, names: Collection[str]) -> dict[str, StoredCalendar]:
        """As `CalendarStore.calendars_named`, in the hold's transaction."""
        ...

    async def apply_tasks(
        self,
        created: Sequence[Task],
        updated: Sequence[TaskUpdate],
        deleted: Sequence[TaskDelete],
        *,
        at: datetime,
        actor: str | None = None,
    ) -> None:
        """As `TaskStore.apply_tasks`, in the hold's transaction (committed when the
        block ends without an exception). At most once per hold."""
        ...


class EventStore(Protocol):
    """The outbox of events (`domain.events`). Events are written by the TaskStore
    methods that record their causes, in the same transaction; this port delivers them.
    Every decision (claimed, sent, retried, dropped) is the domain's."""

    async def claim_events(
        self, now: datetime, limit: int, skip: Collection[str] = ()
    ) -> list[Outgoing]:
        """Atomically take up to `limit` pending events due at `now`, earliest first,
        each as `domain.events.claimed` (or `lapsed`: past its deadline, DROPPED and
        returned so, not to be sent), with its body as written; none whose destination
        URL is in `skip` (the sender's destinations already at their limit). Two callers
        never take the same attempt."""
        ...

    async def record_deliveries(
        self, results: Sequence[tuple[UUID, int, Delivery]], now: datetime
    ) -> list[Progress]:
        """Settle attempts (event id, its `attempts` when claimed, how it went) with
        `domain.events.attempted`, in one transaction. An attempt whose claim was taken
        over meanwhile (attempts moved on) or that is no longer pending is left out."""
        ...

    async def list_events(
        self, status: EventStatus | None, after: EventPageKey | None, limit: int
    ) -> list[Event]:
        """Events newest first by (created_at, id), strictly after `after`."""
        ...

    async def count_events(self, status: EventStatus) -> int: ...

    async def delete_events_before(self, cutoff: datetime, batch: int) -> int:
        """Delete up to `batch` sent or dropped events finished before `cutoff`."""
        ...


class TaskStore(Protocol):
    """Tasks, runs, leases and task history. Every mutation of a task notifies the
    waker's channel in the same transaction, so engines wake as soon as the write is
    visible, and records the version it makes in the task's history in that
    transaction too (`domain.history`; `actor` is who asked, None for no one known)."""

    async def create_task(self, task: Task, *, actor: str | None = None) -> Task:
        """Insert `task` as given (version 1) and its history's version 1
        (`domain.history.created`). Raises DuplicateTaskName."""
        ...

    async def get_task(self, task_id: UUID) -> Task:
        """Raises TaskNotFound."""
        ...

    async def get_task_by_name(self, name: str) -> Task:
        """Raises TaskNotFound."""
        ...

    async def list_tasks(
        self, task_filter: TaskFilter, after: TaskPageKey | None, limit: int
    ) -> list[Task]:
        """Up to `limit` tasks matching the filter, ordered by (created_at, id), strictly
        after the key `after` when given."""
        ...

    async def tasks_covered(self, scope: HoldScope) -> list[Task]:
        """The stored tasks `scope` covers (`HoldScope.covers`), in id order, read at one
        instant (one statement): what an apply decides from without holding them."""
        ...

    async def update_task(
        self,
        task: Task,
        expected_version: int,
        *,
        reschedule: bool,
        actor: str | None = None,
        read: Task | None = None,
    ) -> Task:
        """Write the writable fields of `task` if the stored version is `expected_version`,
        and bump the version and `updated_at` (to `task.updated_at`); record the version
        (`domain.history.changed` of the stored task, cause api).

        With `reschedule`, also write `next_fire_at`, `next_run_at` and
        `consecutive_failures` from `task`; without it the stored values stay (a claim may
        have advanced them meanwhile). With `reschedule` and `read` (the stored task the
        new schedule was planned from), only while the stored `next_fire_at` is still
        `read`'s: a claim moved it meanwhile raises ScheduleMoved, nothing written.
        The queued runs `domain.overlap.dropped_queue` names (paused: every one; overlap
        skip: the task's own, not its backfills') are cancelled in the same transaction.
        Raises TaskNotFound, VersionConflict, ScheduleMoved,
        DuplicateTaskName.
        """
        ...

    async def delete_task(
        self,
        task_id: UUID,
        *,
        at: datetime | None = None,
        actor: str | None = None,
        expected_version: int | None = None,
    ) -> None:
        """Delete the task and its leases, and cancel its queued runs
        (`domain.overlap.CANCELLED_BY_DELETE`); its runs and history stay readable, the history
        ending with the deletion (`domain.history.deleted`, at `at`, else the store's
        clock). With `expected_version`, only if the stored task is at that version, checked
        in the transaction of the delete (else VersionConflict, nothing changed). Raises
        TaskNotFound, VersionConflict."""
        ...

    async def apply_tasks(
        self,
        created: Sequence[Task],
        updated: Sequence[TaskUpdate],
        deleted: Sequence[TaskDelete],
        *,
        at: datetime,
        actor: str | None = None,
        kept: Sequence[TaskKept] = (),
    ) -> None:
        """In one transaction, all or nothing: create each of `created` as `create_task`
        does, write each of `updated` as `update_task` does, delete each of `deleted` as
        `delete_task` does with its `expected_version` (at `at`), with their history
        versions and one notification; each of `kept` is locked as the updated are and
        must be stored at its version (else TaskNotFound or VersionConflict).
        Raises DuplicateTaskName, VersionConflict or TaskNotFound, having written
        nothing, when any one of them would (VersionConflict also for an update whose
        `read` schedule a claim moved)."""
        ...

    def hold_tasks(self, scope: HoldScope) -> AbstractAsyncContextManager[TaskHold]:
        """Lock the calendars `scope` names, then the stored tasks it covers, and read
        those tasks, until the block ends: a write to one of them (an update, a delete,
        a count of outcomes) waits for it, and no claim takes them while it lasts.
        What the block writes through the hold is committed as it ends; an exception
        leaving the block writes nothing. A task created meanwhile under a name of the
        scope makes the hold's create a DuplicateTaskName."""
        ...

    async def task_history(
        self, task_id: UUID, before_version: int | None, limit: int
    ) -> list[TaskVersion]:
        """Up to `limit` versions of the task (also of a deleted one), newest first, each
        below `before_version` when given; [] for an id with no history."""
        ...

    async def task_version_at(self, task_id: UUID, at: datetime) -> TaskVersion | None:
        """The version in force at `at`: the newest one made at or before it (its `state`
        is the task then, None when it was deleted), or None when there was none yet."""
        ...

    async def delete_history_before(self, cutoff: datetime, batch: int) -> int:
        """Delete up to `batch` versions made before `cutoff` that no longer tell what was
        in force at the cutoff (a later version was made by then) and deletions made
        before it; return how many. What was in force at the cutoff is kept."""
        ...

    async def claim_due(self, now: datetime, limit: int, replica: str) -> list[ClaimedRun]:
        """Atomically claim up to `limit` tasks with `enabled and next_run_at <= now`,
        earliest first: apply `domain.claims.claim()` to each, then, under the task's
        lease lock, `domain.overlap.plan()`: start the oldest queued runs the free slots
        allow, and record each occurrence to call as the plan placed it (RUNNING with a
        lease, QUEUED, SKIPPED; a replaced run in flight gets a cancel request with
        `domain.overlap.replaced_by`, a replaced queued run is CANCELLED). Advance
        `next_fire_at`/`next_run_at`, record the runs, commit. Returns the runs made and
        the queued runs started (RUNNING, owned by `replica`). Two callers never receive
        the same occurrence, nor start the same queued run.
        """
        ...

    async def start_manual_run(
        self, task_id: UUID, now: datetime, replica: str, busy: str | None = None
    ) -> ClaimedRun:
        """Record a manual run scheduled for `now` (also for a paused task), taking a lease
        under the same `max_running_instances` rule (SKIPPED at the limit), or SKIPPED with
        `busy` as its error when given (the replica has no room for the call: see
        `domain.manual_runs`). The task's schedule is untouched. Raises TaskNotFound."""
        ...

    async def renew_lease(self, run: Run, now: datetime, expires_at: datetime) -> Run | None:
        """Move the lease of RUNNING `run` to `expires_at` (its row's `lease_expires_at`
        and the slot it holds), if it still holds at `now`: the run as it now is. None
        when it no longer does (its lease expired, the run ended, it is gone): the run
        is the lost-run sweep's, and not to be called."""
        ...

    async def finish_runs(self, outcomes: Sequence[tuple[UUID, RunOutcome]]) -> list[Run]:
        """Record how RUNNING runs ended, in one transaction, one after the other in the
        order given, and free their leases. A scheduled (not manual) run updates its task:
        success resets `consecutive_failures`; a failure increments it and, at
        `pause_after_failures`, disables the task (a version of the task with cause
        auto_pause and no actor, in its history; a task paused by one outcome counts the
        later ones as a paused task), with a notification when a task pauses.

        Returns, in the order given, the run of every known id (a run no longer RUNNING,
        lost or already finished, unchanged; an id given twice is recorded once, then
        returned as recorded); unknown ids are left out. Raises ValueError, before
        writing anything, when an outcome is RUNNING. The run-ending calls are written
        once for every store (`adapters/run_ends.py`)."""
        ...

    async def finish_runs_starting(
        self, outcomes: Sequence[tuple[UUID, RunOutcome]], now: datetime, replica: str
    ) -> Freed:
        """`finish_runs`, and in the same transaction, for each task whose slot the batch
        freed, start its oldest queued runs in the slots now free (`domain.overlap`),
        owned by `replica` (the caller calls them). Queued runs of a task the batch
        paused are cancelled instead."""
        ...

    async def expire_lost_runs_starting(self, now: datetime, replica: str) -> Freed:
        """`expire_lost_runs`, and in the same transaction start queued runs in the slots
        the lost runs freed, as `finish_runs_starting` does."""
        ...

    async def next_due_at(self) -> datetime | None:
        """The earliest `next_run_at` of any enabled task."""
        ...

    async def get_run(self, run_id: UUID) -> Run:
        """Raises RunNotFound."""
        ...

    async def list_runs(
        self, task_id: UUID, status: RunStatus | None, after: RunPageKey | None, limit: int
    ) -> list[Run]:
        """The task's runs, newest first by (scheduled_for, id), strictly after `after`."""
        ...

    async def list_all_runs(
        self, run_filter: RunFilter, after: RunPageKey | None, limit: int
    ) -> list[Run]:
        """Runs of every task (deleted ones too) matching the filter, newest first by
        (scheduled_for, id), strictly after `after`: a keyset, so a run is never listed
        twice however runs are written between pages."""
        ...

    async def recent_runs(self, task_ids: Sequence[UUID], limit: int) -> dict[UUID, list[Run]]:
        """The last `limit` runs of each task (as `list_runs` without status or key), in
        one read; every id given is a key, a task without runs maps to []."""
        ...

    async def request_cancel(self, run_id: UUID, reason: str | None = None) -> Run:
        """Mark a RUNNING run's lease as cancel-requested and notify the engines; a
        QUEUED run is CANCELLED at once (uncalled) and returned so. Either ends with
        the error `reason` (None: `domain.overlap.CANCELLED_BY_REQUEST`). Raises
        RunNotFound, RunNotRunning (for a finished run)."""
        ...

    async def cancel_reasons(self, run_ids: Collection[UUID]) -> dict[UUID, str | None]:
        """Which of `run_ids` have a cancel request on their lease, each with the error
        it asks the run to end with (None: `domain.overlap.CANCELLED_BY_REQUEST`)."""
        ...

    async def cancel_requested(self, run_ids: Collection[UUID]) -> set[UUID]:
        """Which of `run_ids` have a cancel request on their lease."""
        ...

    async def expire_lost_runs(self, now: datetime) -> list[Run]:
        """Mark RUNNING runs whose lease expired before `now` as FAILED with the error
        "replica lost", free their leases, and return them."""
        ...

    async def end_stalled_transactions(self, older_than: timedelta) -> int:
        """End the transactions of this scheduler's other connections that have been
        open longer than `older_than` (a replica stopped mid-transaction holds its row
        and lease locks for as long as it is stopped, and other replicas skip those
        tasks); return how many. Their work rolls back, uncommitted, so nothing was
        called for it. A store without transactions ends none."""
        ...

    async def drop_runs_before(self, cutoff: datetime, now: datetime) -> int:
        """Remove in bulk what the store holds in bulk: on PostgreSQL, each week
        partition of runs scheduled wholly before `cutoff` whose runs have all finished
        (none queued or running), after making the partitions for `now` and the week
        after; return how many runs went. A store without partitions removes nothing
        here (`delete_runs_before` removes the same runs, a batch at a time)."""
        ...

    async def delete_runs_before(self, cutoff: datetime, batch: int) -> int:
        """Delete up to `batch` finished runs scheduled before `cutoff`; return how many."""
        ...

    async def delete_runs_over_limit(self, batch: int) -> int:
        """Delete up to `batch` finished runs of tasks with a `history_limit`, those
        past each task's newest `history_limit` finished runs (`domain.retention`);
        return how many. Queued and running runs are never deleted nor counted."""
        ...

    async def ping(self) -> None:
        """Raise StoreUnavailable unless the store answers."""
        ...
