"""The TaskStore port on PostgreSQL (psycopg 3, async, one connection pool).

Particular to this adapter:
- every statement runs in `schema` (default "scheduler"), created by `initializer`;
- task writes and cancel requests send `pg_notify` on `<schema>_tasks` and
  `<schema>_cancel` in the transaction of the write, which `PostgresWaker` listens to;
- transactions run in pipeline mode, so a claim batch of any size costs three round
  trips: (BEGIN, select due), (lock leases, count leases), (record claims, COMMIT);
- a lost connection, a refused one or a pool timeout raises StoreUnavailable, and the
  transaction it interrupted is rolled back: nothing is half-written.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from pydantic import ValidationError

from adapters.postgres.claiming import ClaimBatch, lease_lock_key, manual_run_params
from adapters.postgres.errors import translated_errors
from adapters.postgres.events import (
    PostgresOutbox,
    read_task_refs,
    task_counts,
    task_refs,
    write_events,
)
from adapters.postgres.finishing import OutcomeBatch, counted_tasks
from adapters.postgres.pool import live_connection
from adapters.postgres.queries import bind_queries
from adapters.postgres.queueing import Queues
from adapters.postgres.rows import task_params, to_run, to_task, to_version, version_params
from adapters.postgres.run_listing import reads_per_task, run_listing, tagged_tasks
from adapters.postgres.slots import SlotRead, SlotWrites, place_claim
from application.ports import Freed, RunFilter, RunPageKey, TaskFilter, TaskPageKey, TaskUpdate
from domain.claims import claim, claimed_task_fields, new_run, resolve_status
from domain.errors import (
    DuplicateTaskName,
    RunNotFound,
    RunNotRunning,
    StoreUnavailable,
    TaskNotFound,
    VersionConflict,
)
from domain.events import EventRules, claim_events, outcome_events
from domain.history import TaskVersion
from domain.history import created as first_version
from domain.instants import truncate
from domain.overlap import (
    CANCELLED_BY_DELETE,
    Slots,
    dropped_queue_error,
    keeps_queue,
)
from domain.runs import REPLICA_LOST, ClaimedRun, Run, RunOutcome, RunStatus
from domain.tasks import Task

log = logging.getLogger(__name__)

Row = dict[str, Any]


def channels(schema: str) -> tuple[str, str]:
    """The NOTIFY channels of a schema: task changes, cancel requests."""
    return f"{schema}_tasks", f"{schema}_cancel"


class PostgresTaskStore:
    """Tasks, runs and leases in PostgreSQL. `pool` is opened and closed by its owner.
    `outbox` is the EventStore of the same schema; the events `events` says a claim or
    an outcome raises are written in the transaction that records it."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        schema: str = "scheduler",
        events: EventRules | None = None,
    ) -> None:
        self._pool = pool
        self.schema = schema
        self._rules = events or EventRules()
        self.outbox = PostgresOutbox(pool, schema)
        self._q = bind_queries(schema)
        self.tasks_channel, self.cancel_channel = channels(schema)
        self._queues = Queues(self._q, schema, _valid_task)

    # -- plumbing --------------------------------------------------------------------

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        async with translated_errors(), live_connection(self._pool) as conn:
            yield conn

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncConnection[Any]]:
        """One transaction in pipeline mode: statements go out without waiting for each
        other; a round trip happens only where a result is read, and at COMMIT.

        BEGIN and COMMIT are plain statements in the pipeline (`conn.transaction()`
        would add a Sync, so a round trip, at each end). On any exception the
        transaction is rolled back, unless the connection itself is gone, in which case
        the server has already rolled it back and the pool discards the connection.
        """
        async with self._connection() as conn:
            try:
                async with conn.pipeline():
                    if conn.autocommit:  # otherwise psycopg queues the BEGIN itself
                        await conn.execute(b"BEGIN", prepare=False)
                    yield conn
                    await conn.execute(b"COMMIT", prepare=False)
            except BaseException:
                if not conn.closed:
                    with contextlib.suppress(psycopg.Error):
                        await conn.rollback()
                raise

    async def _one(self, query: str, params: dict[str, Any]) -> Row | None:
        rows = await self._all(query, params)
        return rows[0] if rows else None

    async def _all(self, query: str, params: dict[str, Any]) -> list[Row]:
        """Run the named read `query` (see `_read`)."""
        return await self._read(self._q[query], params)

    async def _read(self, query: bytes, params: dict[str, Any]) -> list[Row]:
        """Run one read. A connection that died while idle is skipped before use
        (`live_connection`); one found dead only when the read was sent (it died just
        then, or its network was cut) is retried on another, at most once per connection
        the pool can hold: reading twice is harmless. Writes are never retried: one may
        have reached the server."""
        attempts = self._pool.max_size + 1
        for attempt in range(1, attempts + 1):
            conn: AsyncConnection[Any] | None = None
            try:
                async with live_connection(self._pool) as conn:
                    cur = conn.cursor(row_factory=dict_row)
                    await cur.execute(query, params)
                    return await cur.fetchall()
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if attempt < attempts and conn is not None and conn.closed:
                    log.info("retrying a read on a new connection: %s", exc)
                    continue
                raise StoreUnavailable("the database is unavailable") from exc
        raise AssertionError("unreachable")

    async def _notify(self, conn: AsyncConnection[Any], channel: str, payload: object) -> None:
        await conn.execute(self._q["notify"], {"channel": channel, "payload": str(payload)})

    # -- tasks -----------------------------------------------------------------------

    async def create_task(self, task: Task, *, actor: str | None = None) -> Task:
        try:
            async with self._transaction() as conn:
                cur = conn.cursor(row_factory=dict_row)
                await cur.execute(self._q["insert_task"], task_params(task))
                await conn.execute(
                    self._q["insert_history"], version_params(first_version(task, actor))
                )
                row = await cur.fetchone()
                await self._notify(conn, self.tasks_channel, task.id)
        except psycopg.errors.UniqueViolation as exc:
            raise _unique_violation(exc, task) from exc
        assert row is not None
        return to_task(row)

    async def get_task(self, task_id: UUID) -> Task:
        row = await self._one("get_task", {"id": task_id})
        if row is None:
            raise TaskNotFound(task_id)
        return to_task(row)

    async def get_task_by_name(self, name: str) -> Task:
        row = await self._one("get_task_by_name", {"name": name})
        if row is None:
            raise TaskNotFound(name)
        return to_task(row)

    async def list_tasks(
        self, task_filter: TaskFilter, after: TaskPageKey | None, limit: int
    ) -> list[Task]:
        rows = await self._all(
            "list_tasks",
            {
                "enabled": task_filter.enabled,
                "tag": task_filter.tag,
                "prefix": task_filter.name_prefix,
                "after_created_at": after.created_at if after else None,
                "after_id": after.id if after else None,
                "limit": limit,
            },
        )
        return [to_task(row) for row in rows]

    async def update_task(
        self, task: Task, expected_version: int, *, reschedule: bool, actor: str | None = None
    ) -> Task:
        params = task_params(task) | {
            "expected_version": expected_version,
            "reschedule": reschedule,
            "actor": actor,
        }
        try:
            async with self._transaction() as conn:
                cur = conn.cursor(row_factory=dict_row)
                await cur.execute(self._q["update_task"], params)
                row = await cur.fetchone()
                if row is None:
                    await cur.execute(self._q["task_version"], {"id": task.id})
                    found = await cur.fetchone()
                    if found is None:
                        raise TaskNotFound(task.id)
                    raise VersionConflict(task.id, expected_version, found["version"])
                if not keeps_queue(task):
                    await self._queues.drop(
                        conn, [task.id], dropped_queue_error(task), task.updated_at
                    )
                await self._notify(conn, self.tasks_channel, task.id)
        except psycopg.errors.UniqueViolation as exc:
            raise _unique_violation(exc, task) from exc
        return to_task(row)

    async def delete_task(
        self, task_id: UUID, *, at: datetime | None = None, actor: str | None = None
    ) -> None:
        async with self._transaction() as conn:
            await self._queues.drop(conn, [task_id], CANCELLED_BY_DELETE, at)
            params = {"id": task_id, "at": at, "actor": actor}
            cur = await conn.execute(self._q["delete_task"], params)
            if await cur.fetchone() is None:
                raise TaskNotFound(task_id)
            await self._notify(conn, self.tasks_channel, task_id)

    async def apply_tasks(
        self,
        created: Sequence[Task],
        updated: Sequence[TaskUpdate],
        deleted: Sequence[UUID],
        *,
        at: datetime,
        actor: str | None = None,
    ) -> None:
        """One transaction whose statements go out batched (executemany in the pipeline):
        a round trip per kind of write, however many tasks."""
        try:
            async with self._transaction() as conn:
                cur = conn.cursor(row_factory=dict_row)
                if deleted:
                    await self._queues.drop(conn, list(deleted), CANCELLED_BY_DELETE, at)
                    gone = [{"id": task_id, "at": at, "actor": actor} for task_id in deleted]
                    await cur.executemany(self._q["delete_task"], gone, returning=True)
                    for task_id in deleted:
                        if await cur.fetchone() is None:
                            raise TaskNotFound(task_id)
                        cur.nextset()
                if updated:
                    params = [
                        task_params(u.task)
                        | {
                            "expected_version": u.expected_version,
                            "reschedule": u.reschedule,
                            "actor": actor,
                        }
                        for u in updated
                    ]
                    await cur.executemany(self._q["update_task"], params, returning=True)
                    for update in updated:
                        if await cur.fetchone() is None:
                            raise VersionConflict(update.task.id, update.expected_version)
                        cur.nextset()
                    for update in updated:
                        if not keeps_queue(update.task):
                            error = dropped_queue_error(update.task)
                            await self._queues.drop(conn, [update.task.id], error, at)
                if created:
                    await cur.executemany(self._q["insert_task"], [task_params(t) for t in created])
                    versions = [version_params(first_version(t, actor)) for t in created]
                    await cur.executemany(self._q["insert_history"], versions)
                await self._notify(conn, self.tasks_channel, "apply")
        except psycopg.errors.UniqueViolation as exc:
            names = ", ".join(task.name for task in created)
            raise DuplicateTaskName(names) from exc

    async def task_history(
        self, task_id: UUID, before_version: int | None, limit: int
    ) -> list[TaskVersion]:
        params = {"task_id": task_id, "before": before_version, "limit": limit}
        return [to_version(row) for row in await self._all("task_history", params)]

    async def task_version_at(self, task_id: UUID, at: datetime) -> TaskVersion | None:
        row = await self._one("task_version_at", {"task_id": task_id, "at": at})
        return None if row is None else to_version(row)

    async def delete_history_before(self, cutoff: datetime, batch: int) -> int:
        async with self._transaction() as conn:
            cur = await conn.execute(
                self._q["delete_history_before"], {"cutoff": cutoff, "batch": batch}
            )
        return max(cur.rowcount, 0)

    async def next_due_at(self) -> datetime | None:
        row = await self._one("next_due_at", {})
        return None if row is None else row["min"]

    # -- claims ----------------------------------------------------------------------

    async def claim_due(self, now: datetime, limit: int, replica: str) -> list[ClaimedRun]:
        claimed: list[ClaimedRun] = []
        batch = ClaimBatch()
        writes = SlotWrites()
        async with self._transaction() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(self._q["claim_due"], {"now": now, "limit": limit}, binary=True)
            decided = []
            for row in await cur.fetchall():
                task = _valid_task(row)
                if task is not None:
                    decided.append((task, claim(task, now)))
            reads = await self._queues.claim_slots(conn, decided, now)
            for task, decision in decided:
                if decision is None:
                    # next_run_at disagrees with next_fire_at (a hand edit?): mended.
                    batch.add(task.id, claimed_task_fields(task, None, None))
                    continue
                # catch_up "all": each earlier occurrence a run of its own, first.
                occurrences = [
                    *((e.status, e.scheduled_for, e.coalesced) for e in decision.earlier),
                    (decision.status, decision.scheduled_for, decision.coalesced),
                ]
                read = reads.get(task.id) or SlotRead(Slots(task.max_running_instances, 0), [], [])
                runs = place_claim(task, occurrences, read, now, replica, writes)
                for run in runs[:-1]:
                    batch.add_run(run)
                batch.add(task.id, claimed_task_fields(task, decision, runs[-1]), runs[-1])
                claimed += [ClaimedRun(task=task, run=run) for run in runs]
            if batch:
                await conn.execute(self._q["record_claims"], batch.params())
            # After record_claims: a run this claim started may be the one replaced.
            started = await writes.write(conn, self._q, now)
            await write_events(conn, self.schema, claim_events(self._rules, claimed))
            if writes.stop:
                await self._notify(conn, self.cancel_channel, "replace")
        return await writes.started(started) + claimed

    async def _lease_counts(
        self, conn: AsyncConnection[Any], task_ids: list[UUID], now: datetime
    ) -> dict[UUID, int]:
        """Lock the tasks' lease keys (sorted: two batches never wait on each other in a
        cycle), then count their unexpired leases in a statement of its own, whose
        snapshot is taken once every lock is held."""
        if not task_ids:
            return {}
        keys = sorted({lease_lock_key(self.schema, task_id) for task_id in task_ids})
        await conn.execute(self._q["lock_leases"], {"keys": keys})
        cur = await conn.execute(self._q["count_leases"], {"task_ids": task_ids, "now": now})
        return {task_id: count for task_id, count in await cur.fetchall()}

    async def start_manual_run(self, task_id: UUID, now: datetime, replica: str) -> ClaimedRun:
        async with self._transaction() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(self._q["get_task"], {"id": task_id})
            leases = await self._lease_counts(conn, [task_id], now)
            row = await cur.fetchone()
            if row is None:
                raise TaskNotFound(task_id)
            task = to_task(row)
            status = resolve_status(
                RunStatus.RUNNING, leases.get(task_id, 0), task.max_running_instances
            )
            run = new_run(task, now, replica, status, truncate(now), 1, manual=True)
            await conn.execute(self._q["record_manual_run"], manual_run_params(run))
            manual = ClaimedRun(task=task, run=run)
            await write_events(conn, self.schema, claim_events(self._rules, [manual]))
        return manual

    # -- runs ------------------------------------------------------------------------

    async def finish_run(self, run_id: UUID, outcome: RunOutcome) -> Run:
        runs = await self.finish_runs([(run_id, outcome)])
        if not runs:
            raise RunNotFound(run_id)
        return runs[0]

    async def finish_runs(self, outcomes: Sequence[tuple[UUID, RunOutcome]]) -> list[Run]:
        return (await self._finish_runs(outcomes, None)).runs

    async def finish_runs_starting(
        self, outcomes: Sequence[tuple[UUID, RunOutcome]], now: datetime, replica: str
    ) -> Freed:
        return await self._finish_runs(outcomes, (now, replica))

    async def _finish_runs(
        self, outcomes: Sequence[tuple[UUID, RunOutcome]], starting: tuple[datetime, str] | None
    ) -> Freed:
        """Two round trips, whatever the size of the batch: (BEGIN, lock the tasks
        whose count may change, finish the runs), (count on the tasks, read the runs
        that were not running, COMMIT); one more when a task of the batch has queued
        runs to start (`_refill`)."""
        batch = OutcomeBatch.of(outcomes)
        if not batch:
            return Freed([], [])
        params = batch.params()
        paused: list[UUID] = []
        async with self._transaction() as conn:
            # Tasks first, then runs and leases: the order a task's deletion takes.
            locking = conn.cursor(row_factory=dict_row)
            await locking.execute(
                self._q["lock_counted_tasks"],
                {"run_ids": params["run_ids"], "status": params["status"]},
            )
            refs = await read_task_refs(conn, self.schema, self._rules, batch.run_ids)
            finishing = conn.cursor(row_factory=dict_row)
            await finishing.execute(self._q["finish_runs"], params, binary=True)
            queueing = await self._queues.send_queued_tasks(conn, params["run_ids"], starting)
            locked = await locking.fetchall()
            runs = {row["id"]: to_run(row) for row in await finishing.fetchall()}
            ended = [runs[i] for i in batch.outcomes if i in runs]
            if locked:
                counted = counted_tasks(locked, ended)
                if counted is not None:
                    counted["channel"] = self.tasks_channel
                    await conn.execute(self._q["count_outcomes"], counted)
                    paused = [
                        t for t, p in zip(counted["task_ids"], counted["paused"], strict=True) if p
                    ]
            events = outcome_events(self._rules, await task_refs(refs), task_counts(locked), ended)
            await write_events(conn, self.schema, events)
            missing = [run_id for run_id in batch.outcomes if run_id not in runs]
            if missing:
                unchanged = conn.cursor(row_factory=dict_row)
                await unchanged.execute(self._q["get_runs"], {"ids": missing}, binary=True)
            writes, started = await self._queues.refill(conn, queueing, starting, paused)
        if missing:  # read in the transaction, fetched after its COMMIT
            runs.update((row["id"], to_run(row)) for row in await unchanged.fetchall())
        ordered = [runs[run_id] for run_id, _ in outcomes if run_id in runs]
        return Freed(ordered, await writes.started(started))

    async def get_run(self, run_id: UUID) -> Run:
        row = await self._one("get_run", {"id": run_id})
        if row is None:
            raise RunNotFound(run_id)
        return to_run(row)

    async def list_runs(
        self, task_id: UUID, status: RunStatus | None, after: RunPageKey | None, limit: int
    ) -> list[Run]:
        params: dict[str, Any] = {
            "task_id": task_id,
            "status": None if status is None else status.value,
            "limit": limit,
        }
        if after is None:
            rows = await self._all("list_runs", params)
        else:
            params |= {"after_scheduled_for": after.scheduled_for, "after_id": after.id}
            rows = await self._all("list_runs_after", params)
        return [to_run(row) for row in rows]

    async def list_all_runs(
        self, run_filter: RunFilter, after: RunPageKey | None, limit: int
    ) -> list[Run]:
        per_task = False
        if run_filter.tag is not None and run_filter.task_id is None:
            counts = await self._read(tagged_tasks(self.schema), {"tag": run_filter.tag})
            tagged, tasks = counts[0]["tagged"], counts[0]["tasks"]
            if not tagged:
                return []
            per_task = reads_per_task(tagged, tasks)
        query, params = run_listing(self.schema, run_filter, after, limit, per_task=per_task)
        rows = await self._read(query, params)
        return [to_run(row) for row in rows]

    async def recent_runs(self, task_ids: Sequence[UUID], limit: int) -> dict[UUID, list[Run]]:
        recent: dict[UUID, list[Run]] = {task_id: [] for task_id in task_ids}
        if recent:
            rows = await self._all("recent_runs", {"task_ids": list(recent), "limit": limit})
            for row in rows:
                run = to_run(row)
                recent[run.task_id].append(run)
        return recent

    async def request_cancel(self, run_id: UUID) -> Run:
        async with self._transaction() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(self._q["lock_run"], {"id": run_id})
            row = await cur.fetchone()
            if row is None:
                raise RunNotFound(run_id)
            run = to_run(row)
            if run.status is RunStatus.QUEUED:
                return await self._queues.cancel_queued(conn, run)
            if run.status is not RunStatus.RUNNING:
                raise RunNotRunning(run_id, run.status.value)
            await conn.execute(self._q["request_cancel"], {"id": run_id})
            await self._notify(conn, self.cancel_channel, run_id)
        return run

    async def cancel_reasons(self, run_ids: Collection[UUID]) -> dict[UUID, str | None]:
        if not run_ids:
            return {}
        rows = await self._all("cancel_reasons", {"ids": list(run_ids)})
        return {row["run_id"]: row["cancel_reason"] for row in rows}

    async def cancel_requested(self, run_ids: Collection[UUID]) -> set[UUID]:
        if not run_ids:
            return set()
        rows = await self._all("cancel_requested", {"ids": list(run_ids)})
        return {row["run_id"] for row in rows}

    async def expire_lost_runs(self, now: datetime) -> list[Run]:
        return (await self._expire_lost_runs(now, None)).runs

    async def expire_lost_runs_starting(self, now: datetime, replica: str) -> Freed:
        return await self._expire_lost_runs(now, (now, replica))

    async def _expire_lost_runs(
        self, now: datetime, starting: tuple[datetime, str] | None
    ) -> Freed:
        async with self._transaction() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                self._q["expire_lost_runs"],
                {"now": now, "finished_at": truncate(now), "error": REPLICA_LOST},
            )
            lost = [to_run(row) for row in await cur.fetchall()]
            if lost:
                refs = await read_task_refs(conn, self.schema, self._rules, [r.id for r in lost])
                events = outcome_events(self._rules, await task_refs(refs), {}, lost)
                await write_events(conn, self.schema, events)
            queueing = await self._queues.send_queued_tasks(
                conn, [run.id for run in lost], starting
            )
            writes, started = await self._queues.refill(conn, queueing, starting, [])
        return Freed(lost, await writes.started(started))

    async def delete_runs_before(self, cutoff: datetime, batch: int) -> int:
        async with self._transaction() as conn:
            cur = await conn.execute(
                self._q["delete_runs_before"], {"cutoff": cutoff, "batch": batch}
            )
        return max(cur.rowcount, 0)

    async def ping(self) -> None:
        await self._one("ping", {})


def _valid_task(row: Row) -> Task | None:
    """The task of a locked row, or None (logged) when it no longer validates: one bad
    row must not stop every claim."""
    try:
        return to_task(row)
    except ValidationError as exc:
        log.error("task %s does not validate and is not claimed: %s", row.get("id"), exc)
        return None


def _unique_violation(exc: psycopg.errors.UniqueViolation, task: Task) -> Exception:
    if exc.diag.constraint_name == "tasks_name_key":
        return DuplicateTaskName(task.name)
    return ValueError(f"a task with id {task.id} already exists")
