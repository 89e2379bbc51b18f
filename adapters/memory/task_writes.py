"""Writing tasks in memory: create, update, delete, and a batch of all three
(`apply_tasks`, all checked before any is written), each recording the history; and the
hold (`hold_tasks`) under whose lock a batch is decided and written."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from uuid import UUID

from adapters.memory.state import MemoryStoreBase, copy_task
from application.ports import HoldScope, TaskDelete, TaskHold, TaskKept, TaskUpdate
from domain.calendars import StoredCalendar
from domain.errors import (
    DuplicateTaskName,
    ScheduleMoved,
    VersionConflict,
)
from domain.history import changed, created, deleted
from domain.instants import truncate
from domain.overlap import DELETED, dropped_queue
from domain.tasks import Task, TaskSpec

_WRITABLE = tuple(TaskSpec.model_fields)
_SCHEDULE = ("next_fire_at", "next_run_at", "consecutive_failures")


class TaskWrites(MemoryStoreBase):
    """The task writes of `InMemoryTaskStore`."""

    async def create_task(self, task: Task, *, actor: str | None = None) -> Task:
        async with self._lock:
            stored = self._create(task, actor)
        self.notifier.notify()
        return copy_task(stored)

    def _create(self, task: Task, actor: str | None) -> Task:
        if task.name in self._names:
            raise DuplicateTaskName(task.name)
        if task.id in self._tasks:
            raise ValueError(f"a task with id {task.id} already exists")
        self._check_calendar_named(task)
        stored = copy_task(task.model_copy(update={"version": 1}))
        self._tasks[task.id] = stored
        self._names[task.name] = task.id
        self._history[task.id] = [created(stored, actor)]
        return stored

    async def update_task(
        self,
        task: Task,
        expected_version: int,
        *,
        reschedule: bool,
        actor: str | None = None,
        read: Task | None = None,
    ) -> Task:
        async with self._lock:
            self._check_schedule(task.id, expected_version, reschedule, read)
            updated = self._update(task, expected_version, reschedule, actor)
        self.notifier.notify()
        return copy_task(updated)

    def _check_schedule(
        self, task_id: UUID, expected_version: int, reschedule: bool, read: Task | None
    ) -> None:
        """ScheduleMoved when a claim moved the schedule a rescheduling write planned from."""
        stored = self._at_version(task_id, expected_version)
        if reschedule and read is not None and stored.next_fire_at != read.next_fire_at:
            raise ScheduleMoved(task_id)

    def _update(
        self, task: Task, expected_version: int, reschedule: bool, actor: str | None
    ) -> Task:
        stored = self._at_version(task.id, expected_version)
        owner = self._names.get(task.name)
        if owner is not None and owner != task.id:
            raise DuplicateTaskName(task.name)
        self._check_calendar_named(task)
        fields = _WRITABLE + _SCHEDULE if reschedule else _WRITABLE
        update = {name: getattr(task, name) for name in fields}
        update |= {"version": stored.version + 1, "updated_at": task.updated_at}
        updated = copy_task(stored.model_copy(update=update))
        del self._names[stored.name]
        self._names[updated.name] = updated.id
        self._tasks[updated.id] = updated
        self._history.setdefault(updated.id, []).append(changed(stored, updated, actor))
        if (drop := dropped_queue(updated)) is not None:
            self.backfills.settle(self._slots.cancel_queue(updated.id, updated.updated_at, drop))
        return updated

    async def delete_task(
        self,
        task_id: UUID,
        *,
        at: datetime | None = None,
        actor: str | None = None,
        expected_version: int | None = None,
    ) -> None:
        async with self._lock:
            stored = self._task(task_id)
            if expected_version is not None and stored.version != expected_version:
                raise VersionConflict(task_id, expected_version, stored.version)
            self._delete(task_id, at, actor)
        self.notifier.notify()

    def _delete(self, task_id: UUID, at: datetime | None, actor: str | None) -> None:
        task = self._task(task_id)
        when = truncate(at or datetime.now(UTC))
        self._history.setdefault(task_id, []).append(deleted(task, when, actor))
        # Before the task goes: a backfill this ends is told of where its task said.
        self.backfills.settle(self._slots.cancel_queue(task_id, when, DELETED))
        del self._tasks[task_id]
        del self._names[task.name]
        # Its runs in flight keep their leases until they end: no claim counts them any
        # more (the task is gone), and a cancel request still reaches them (PostgreSQL,
        # whose leases go with the task, keeps such requests in run_cancels).

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
        async with self._lock:
            self._check_batch(created, updated, deleted, kept)
            self._write_batch(created, updated, deleted, at, actor)
        self.notifier.notify()

    @asynccontextmanager
    async def hold_tasks(self, scope: HoldScope) -> AsyncIterator[TaskHold]:
        """The store's lock, held for the block: every other write waits for it."""
        async with self._lock:
            hold = _Hold(self, [copy_task(t) for t in self._tasks.values() if scope.covers(t)])
            yield hold
            if hold.batch is None:
                return
            self._write_batch(*hold.batch)
        self.notifier.notify()

    def _check_batch(
        self,
        created: Sequence[Task],
        updated: Sequence[TaskUpdate],
        deleted: Sequence[TaskDelete],
        kept: Sequence[TaskKept] = (),
    ) -> None:
        """Every check of a batch, before anything of it is written."""
        names = dict(self._names)
        for still in kept:
            self._at_version(still.task_id, still.version)
        for gone in deleted:
            del names[self._at_version(gone.task_id, gone.expected_version).name]
        for update in updated:
            del names[self._at_version(update.task.id, update.expected_version).name]
            try:
                self._check_schedule(
                    update.task.id, update.expected_version, update.reschedule, update.read
                )
            except ScheduleMoved:  # as the batch on PostgreSQL tells it: not as read
                raise VersionConflict(update.task.id, update.expected_version) from None
        for task in [*created, *(update.task for update in updated)]:
            if task.name in names:
                raise DuplicateTaskName(task.name)
            names[task.name] = task.id
            self._check_calendar_named(task)

    def _at_version(self, task_id: UUID, version: int) -> Task:
        """The stored task, if at `version`. Raises TaskNotFound, VersionConflict."""
        stored = self._task(task_id)
        if stored.version != version:
            raise VersionConflict(stored.id, version, stored.version)
        return stored

    def _write_batch(
        self,
        created: Sequence[Task],
        updated: Sequence[TaskUpdate],
        deleted: Sequence[TaskDelete],
        at: datetime,
        actor: str | None,
    ) -> None:
        for gone in deleted:
            self._delete(gone.task_id, at, actor)
        for update in updated:
            self._update(update.task, update.expected_version, update.reschedule, actor)
        for task in created:
            self._create(task, actor)


_Batch = tuple[Sequence[Task], Sequence[TaskUpdate], Sequence[TaskDelete], datetime, str | None]


class _Hold:
    """A `TaskHold` in memory: the batch is checked when given, under the store's lock,
    and written when the block ends without an exception."""

    def __init__(self, store: TaskWrites, tasks: list[Task]) -> None:
        self._store = store
        self._tasks = tasks
        self.batch: _Batch | None = None

    @property
    def tasks(self) -> list[Task]:
        return self._tasks

    async def calendars_named(self, names: Collection[str]) -> dict[str, StoredCalendar]:
        return self._store._named_calendars(names)

    async def apply_tasks(
        self,
        created: Sequence[Task],
        updated: Sequence[TaskUpdate],
        deleted: Sequence[TaskDelete],
        *,
        at: datetime,
        actor: str | None = None,
    ) -> None:
        self._store._check_batch(created, updated, deleted)
        self.batch = (created, updated, deleted, at, actor)
