"""Writing tasks on PostgreSQL: create, update, delete, and a batch of all three
(`apply_tasks`), each in one transaction that records the history and sends NOTIFY; and
the hold (`hold_tasks`) in whose transaction a batch is decided and written."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from typing import Any, NoReturn
from uuid import UUID

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from adapters.postgres.advisory import take_hold_lock
from adapters.postgres.calendars import (
    calendars_in,
    lock_calendars,
    lock_named_calendars,
    name_calendars,
    take_calendar_turns,
    unknown_calendar,
)
from adapters.postgres.queries import scope_params
from adapters.postgres.rows import task_params, task_row, task_row_text, to_task
from adapters.postgres.transactions import PostgresStoreBase
from application.ports import HoldScope, TaskDelete, TaskHold, TaskKept, TaskUpdate
from domain.calendars import StoredCalendar
from domain.errors import DuplicateTaskName, ScheduleMoved, TaskNotFound, VersionConflict
from domain.overlap import DELETED, QueueDrop, dropped_queue
from domain.replanning import calendar_name
from domain.tasks import Task


class TaskWrites(PostgresStoreBase):
    """The task writes of `PostgresTaskStore`."""

    async def create_task(self, task: Task, *, actor: str | None = None) -> Task:
        """One statement (create_task): the lock, the row, its version, its calendar
        and the NOTIFY in one round trip, committed by the server as it ends. The task
        stored is the one given, at version 1: it is answered without reading it back
        (the store contract suite holds a read of it equal to it)."""
        if task.version != 1:
            task = task.model_copy(update={"version": 1})
        name = calendar_name(task)
        params = {
            "row": task_row_text(task),
            "calendars": [] if name is None else [name],
            "actor": actor,
            "channel": self.tasks_channel,
        }
        try:
            async with self._connection() as conn:
                await conn.execute(self._q["create_task"], params)
        except psycopg.errors.UniqueViolation as exc:
            raise _unique_violation(exc, task) from exc
        except psycopg.errors.ForeignKeyViolation as exc:
            raise unknown_calendar(exc) from exc
        return task

    async def update_task(
        self,
        task: Task,
        expected_version: int,
        *,
        reschedule: bool,
        actor: str | None = None,
        read: Task | None = None,
    ) -> Task:
        params = task_params(task) | {
            "expected_version": expected_version,
            "reschedule": reschedule,
            "actor": actor,
            "check_schedule": reschedule and read is not None,
            "read_next_fire_at": None if read is None else read.next_fire_at,
        }
        try:
            async with self._transaction() as conn:
                await lock_named_calendars(conn, self._c, [task])
                cur = conn.cursor(row_factory=dict_row)
                await cur.execute(self._q["update_task"], params)
                row = await cur.fetchone()
                if row is None:
                    await self._refuse(conn, task.id, expected_version)
                await name_calendars(conn, self._c, [task], created=False)
                if (drop := dropped_queue(task)) is not None:
                    await self._queues.drop(conn, [task.id], drop, task.updated_at)
                await self._notify(conn, self.tasks_channel, task.id)
        except psycopg.errors.UniqueViolation as exc:
            raise _unique_violation(exc, task) from exc
        except psycopg.errors.ForeignKeyViolation as exc:
            raise unknown_calendar(exc) from exc
        return to_task(row)

    async def delete_task(
        self,
        task_id: UUID,
        *,
        at: datetime | None = None,
        actor: str | None = None,
        expected_version: int | None = None,
    ) -> None:
        """As update_task does: the delete statement holds the version condition, and a
        delete that found no row tells a conflict from a missing task; raising rolls the
        transaction back, the queue drop before it included."""
        async with self._transaction() as conn:
            # The task row before its runs, as every writer of both takes them; its
            # leases in run-id order before the cascade takes them in its own.
            await conn.execute(self._q["lock_tasks"], {"ids": [task_id]})
            await conn.execute(self._q["lock_task_leases"], {"ids": [task_id]})
            await self._queues.drop(conn, [task_id], DELETED, at)
            params = {"id": task_id, "at": at, "actor": actor, "expected_version": expected_version}
            cur = await conn.execute(self._q["delete_task"], params)
            if await cur.fetchone() is None:
                await self._refuse(conn, task_id, expected_version)
            await self._notify(conn, self.tasks_channel, task_id)

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
        """One transaction whose statements go out batched (executemany in the pipeline):
        a round trip per kind of write, however many tasks."""
        with _write_errors(created):
            async with self._transaction() as conn:
                await self._apply_in(conn, created, updated, deleted, at, actor, kept)

    @asynccontextmanager
    async def hold_tasks(self, scope: HoldScope) -> AsyncIterator[TaskHold]:
        """One transaction: one hold at a time (an advisory lock of the schema's, which
        nothing else takes, waited for only once this process's own hold ended), then
        the calendars of `scope` (key share, as every task write takes them first), then
        its tasks (`FOR NO KEY UPDATE`, in id order, as the outcome counts take them),
        and only then their read: a statement that waited for a row lock reads that row
        anew but not the rows committed while it waited (a task another apply created),
        so the read is a statement of its own, again while it finds tasks the locks did
        not take."""
        # Waiting for this process's earlier hold to end keeps no connection from the
        # pool (an audit's 30 applies queued on the advisory lock took all ten, and the
        # replica's reads and engine answered 503): at most one waits there per replica.
        async with self._holding:
            hold: _Hold | None = None
            with _write_errors(lambda: hold.created if hold is not None else []):
                async with self._transaction() as conn:
                    hold = _Hold(self, conn, await self._held_tasks(conn, scope))
                    yield hold

    async def _held_tasks(self, conn: AsyncConnection[Any], scope: HoldScope) -> list[Task]:
        """Lock a hold's tasks, then read them (`hold_tasks` says in which order)."""
        await take_hold_lock(conn, self.schema)
        await take_calendar_turns(conn, self.schema, scope.calendars)
        await lock_calendars(conn, self._c, scope.calendars)
        params = scope_params(scope)
        locked = await conn.execute(self._q["hold_task_ids"], params)
        held = {task_id for (task_id,) in await locked.fetchall()}
        for _ in range(_HOLD_READS):
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(self._q["hold_tasks"], params)
            tasks = [to_task(row) for row in await cur.fetchall()]
            if held.issuperset(task.id for task in tasks):
                break
            held.update(task.id for task in tasks)  # locked now: read once more
        return tasks

    async def _apply_in(
        self,
        conn: AsyncConnection[Any],
        created: Sequence[Task],
        updated: Sequence[TaskUpdate],
        deleted: Sequence[TaskDelete],
        at: datetime,
        actor: str | None,
        kept: Sequence[TaskKept] = (),
    ) -> None:
        await lock_named_calendars(conn, self._c, [*created, *(u.task for u in updated)])
        # The task rows first, in id order, as the outcome counts and a hold take them,
        # before the runs a queue drop changes: the UPDATE below would lock them in the
        # order of its join, and two such writers could wait on each other in a cycle.
        # The kept ones too, in the same statement: a prune waits for this write, or
        # this write finds what the prune did and is decided again.
        ids = (
            {d.task_id for d in deleted} | {u.task.id for u in updated} | {k.task_id for k in kept}
        )
        if ids:
            locked = await conn.execute(self._q["lock_tasks"], {"ids": sorted(ids)})
            if kept:  # read only then: in the pipeline, a fetch waits for the server
                versions = dict(await locked.fetchall())
                for still in kept:
                    if versions.get(still.task_id) != still.version:
                        await self._refuse(conn, still.task_id, still.version)
        # New names in one order, so that two applies creating the same ones wait on
        # the first name both create rather than on each other.
        created = sorted(created, key=lambda task: task.name)
        cur = conn.cursor(row_factory=dict_row)
        if deleted:
            await conn.execute(self._q["lock_task_leases"], {"ids": [d.task_id for d in deleted]})
            await self._queues.drop(conn, [d.task_id for d in deleted], DELETED, at)
            gone = [
                {
                    "id": d.task_id,
                    "at": at,
                    "actor": actor,
                    "expected_version": d.expected_version,
                }
                for d in deleted
            ]
            await cur.executemany(self._q["delete_task"], gone, returning=True)
            for d in deleted:
                if await cur.fetchone() is None:  # gone, or changed since it was read
                    await self._refuse(conn, d.task_id, d.expected_version)
                cur.nextset()
        if updated:
            # One statement, as for the creates below.
            rows = Jsonb(
                [
                    task_row(u.task)
                    | {
                        "expected_version": u.expected_version,
                        "reschedule": u.reschedule,
                        "check_schedule": u.reschedule and u.read is not None,
                        "read_next_fire_at": _instant(
                            None if u.read is None else u.read.next_fire_at
                        ),
                    }
                    for u in updated
                ]
            )
            await cur.execute(self._q["update_tasks"], {"rows": rows, "actor": actor})
            written = {row["id"] for row in await cur.fetchall()}
            for update in updated:
                if update.task.id not in written:
                    raise VersionConflict(update.task.id, update.expected_version)
            await name_calendars(conn, self._c, [u.task for u in updated], created=False)
            # One statement per kind of drop, not one per task: an apply may
            # update thousands of tasks that keep no queue.
            dropping: dict[QueueDrop, list[UUID]] = {}
            for update in updated:
                if (drop := dropped_queue(update.task)) is not None:
                    dropping.setdefault(drop, []).append(update.task.id)
            for drop, task_ids in dropping.items():
                await self._queues.drop(conn, task_ids, drop, at)
        if created:
            # One statement, the rows as one JSON parameter: psycopg adapting
            # each of 22 parameters of each task cost more than the database.
            rows = Jsonb([task_row(task) for task in created])
            await cur.execute(self._q["insert_tasks"], {"rows": rows, "actor": actor})
            await name_calendars(conn, self._c, created, created=True)
        await self._notify(conn, self.tasks_channel, "apply")

    async def _refuse(
        self, conn: AsyncConnection[Any], task_id: UUID, expected_version: int | None
    ) -> NoReturn:
        """Raise what stopped a write conditioned on `expected_version` that found no
        row: TaskNotFound when the task is gone (or no version was asked for),
        ScheduleMoved when it is at that version (a rescheduling write whose schedule a
        claim moved), else VersionConflict naming the version it is at."""
        stored = conn.cursor(row_factory=dict_row)
        await stored.execute(self._q["task_version"], {"id": task_id})
        found = await stored.fetchone()
        if found is None or expected_version is None:
            raise TaskNotFound(task_id)
        if found["version"] == expected_version:
            raise ScheduleMoved(task_id)
        raise VersionConflict(task_id, expected_version, found["version"])


# Reads of a hold's tasks at most: each that finds a task the last did not is followed
# by another (a task committed meanwhile); past them, a create of a listed name made
# meanwhile fails the hold's write and the apply decides again.
_HOLD_READS = 3


class _Hold:
    """A `TaskHold` on PostgreSQL: the transaction of `TaskWrites.hold_tasks`."""

    def __init__(self, store: TaskWrites, conn: AsyncConnection[Any], tasks: list[Task]) -> None:
        self._store = store
        self._conn = conn
        self._tasks = tasks
        self.created: Sequence[Task] = []  # what the hold creates, named by its errors

    @property
    def tasks(self) -> list[Task]:
        return self._tasks

    async def calendars_named(self, names: Collection[str]) -> dict[str, StoredCalendar]:
        return await calendars_in(self._conn, self._store._c, names)

    async def apply_tasks(
        self,
        created: Sequence[Task],
        updated: Sequence[TaskUpdate],
        deleted: Sequence[TaskDelete],
        *,
        at: datetime,
        actor: str | None = None,
    ) -> None:
        self.created = created
        await self._store._apply_in(self._conn, created, updated, deleted, at, actor)


@contextmanager
def _write_errors(
    created: Sequence[Task] | Callable[[], Sequence[Task]],
) -> Iterator[None]:
    """A batch write's errors as the store contract names them: a name taken (by one of
    `created`, or what gives them once the write is done) and a calendar not stored.
    They may come as late as the COMMIT: the statements were pipelined."""
    try:
        yield
    except psycopg.errors.UniqueViolation as exc:
        tasks = created() if callable(created) else created
        raise DuplicateTaskName(", ".join(task.name for task in tasks)) from exc
    except psycopg.errors.ForeignKeyViolation as exc:
        raise unknown_calendar(exc) from exc


def _unique_violation(exc: psycopg.errors.UniqueViolation, task: Task) -> Exception:
    if exc.diag.constraint_name == "tasks_name_key":
        return DuplicateTaskName(task.name)
    return ValueError(f"a task with id {task.id} already exists")


def _instant(at: datetime | None) -> str | None:
    """An instant as a JSON row carries it (read back as timestamptz)."""
    return None if at is None else at.isoformat()
