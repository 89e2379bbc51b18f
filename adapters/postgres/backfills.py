"""The PostgreSQL store's backfills (docs/policies.md, "Backfill"): every run of one
backfill written in one transaction, under the task's lease lock, placed as
`domain.backfills` decided; and a backfill's cancel.

Rows go in with one statement however many runs a backfill makes (arrays, unnest).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row

from adapters.postgres.backfill_ends import counts_of, raise_finished
from adapters.postgres.rows import to_task
from adapters.postgres.slots import SlotWrites, lock_leases, read_slots
from domain.backfills import (
    BACKFILL_QUEUE_BOUND,
    CANCELLED_BY_BACKFILL,
    STOPPED_BY_BACKFILL,
    Backfill,
    BackfillOverlap,
    BackfillRecord,
    BackfillState,
    backfill_plan,
    backfill_run,
    missing,
    new_record,
)
from domain.errors import BackfillNotFound, TaskNotFound
from domain.events import EventRules
from domain.runs import ClaimedRun, RunStatus

_SUCCEEDED = """
SELECT scheduled_for FROM {schema}.runs
WHERE task_id = %(task_id)s AND status = 'succeeded' AND NOT manual
  AND scheduled_for = ANY(%(occurrences)s::timestamptz[])
"""

# The runs of one backfill and, for those that start at once, their leases.
_INSERT = """
WITH recorded AS (
    INSERT INTO {schema}.runs (
        id, task_id, scheduled_for, coalesced, claimed_at, started_at, finished_at,
        lease_expires_at, status, manual, attempts, replica, backfill_id
    )
    SELECT id, %(task_id)s, scheduled_for, 1, %(claimed_at)s, started_at, finished_at,
           lease_expires_at, status, false, 0, %(replica)s, %(backfill_id)s
    FROM unnest(
        %(ids)s::uuid[], %(scheduled_for)s::timestamptz[], %(started_at)s::timestamptz[],
        %(finished_at)s::timestamptz[], %(lease_expires_at)s::timestamptz[],
        %(status)s::text[]
    ) AS b (id, scheduled_for, started_at, finished_at, lease_expires_at, status)
    RETURNING id, task_id, lease_expires_at, replica
)
INSERT INTO {schema}.run_leases (run_id, task_id, expires_at, replica)
SELECT id, task_id, lease_expires_at, replica FROM recorded
WHERE lease_expires_at IS NOT NULL
"""

_INSERT_RECORD = """
INSERT INTO {schema}.backfills (
    id, task_id, task_name, range_start, range_end, overlap, only_missing, created_at,
    actor, runs, status, finished_at
) VALUES (
    %(id)s, %(task_id)s, %(task_name)s, %(start)s, %(end)s, %(overlap)s, %(only_missing)s,
    %(created_at)s, %(actor)s, %(runs)s, %(status)s, %(finished_at)s
)
"""

_RECORD = """
SELECT id, task_id, task_name, range_start AS start, range_end AS "end", overlap,
       only_missing, created_at, actor, runs, status, finished_at
FROM {schema}.backfills WHERE id = %(backfill_id)s
"""

# Its runs counted by status (through runs_backfill_idx).
_COUNTS = """
SELECT status, count(*) FROM {schema}.runs WHERE backfill_id = %(backfill_id)s
GROUP BY status
"""

_MARK_CANCELLED = """
UPDATE {schema}.backfills SET status = 'cancelled', finished_at = %(now)s
WHERE id = %(backfill_id)s AND status = 'active'
"""

# A cancel locks what it changes in the order an outcome batch takes it (docs/storage.md,
# "Lock order"): the leases of the runs in flight, in run-id order (a batch locks a
# lease after the run it ends, and the cancel changes no run in flight, only asks it to
# stop), then the queued runs, in the queue's order; then the backfill's row. It takes
# no lease lock (the task's advisory lock): a claim of a `replace` task holds that lock
# while it asks runs to stop, which a cancel holding their leases would wait on (an
# audit met that cycle hundreds of times). A queued run it holds is not started: a
# start skips a run no longer queued.
_LOCK_IN_FLIGHT = """
SELECT l.run_id FROM {schema}.run_leases AS l JOIN {schema}.runs AS r ON r.id = l.run_id
WHERE r.backfill_id = %(backfill_id)s AND r.status = 'running'
ORDER BY l.run_id FOR NO KEY UPDATE OF l
"""

_LOCK_QUEUED = """
SELECT id FROM {schema}.runs WHERE backfill_id = %(backfill_id)s AND status = 'queued'
ORDER BY scheduled_for, id FOR NO KEY UPDATE
"""

_CANCEL_QUEUED = """
UPDATE {schema}.runs SET status = 'cancelled', finished_at = %(now)s, error = %(error)s
WHERE backfill_id = %(backfill_id)s AND status = 'queued'
"""

_STOP_RUNNING = """
UPDATE {schema}.run_leases SET cancel_requested = true, cancel_reason = %(reason)s
WHERE run_id = ANY(%(run_ids)s::uuid[])
"""

# Its runs in flight whose leases went with their deleted task: asked through
# run_cancels (adapters.postgres.cancels), in run-id order.
_STOP_UNLEASED = """
INSERT INTO {schema}.run_cancels (run_id, reason, requested_at)
SELECT r.id, %(reason)s::text, %(now)s::timestamptz FROM {schema}.runs AS r
WHERE r.backfill_id = %(backfill_id)s AND r.status = 'running'
  AND NOT EXISTS (SELECT FROM {schema}.run_leases AS l WHERE l.run_id = r.id)
ORDER BY r.id
ON CONFLICT (run_id) DO UPDATE SET reason = excluded.reason
RETURNING run_id
"""


class PostgresBackfills:
    """Backfills of one PostgreSQL store (its transactions, queries and schema)."""

    def __init__(
        self,
        transaction: Callable[[], AbstractAsyncContextManager[AsyncConnection[Any]]],
        q: dict[str, bytes],
        schema: str,
        wake_cancels: Callable[[AsyncConnection[Any], list[UUID]], Any],
        rules: EventRules,
        ends: dict[str, bytes],
    ) -> None:
        self._transaction = transaction
        self._q = q
        self._schema = schema
        self._wake_cancels = wake_cancels
        self._rules = rules
        self._ends = ends  # adapters.postgres.backfill_ends.statements
        ident = sql.Identifier(schema)
        self._sql = {
            name: sql.SQL(body).format(schema=ident).as_bytes(None)
            for name, body in (
                ("succeeded", _SUCCEEDED),
                ("insert", _INSERT),
                ("insert_record", _INSERT_RECORD),
                ("record", _RECORD),
                ("lock_record", _RECORD + " FOR UPDATE"),
                ("counts", _COUNTS),
                ("mark_cancelled", _MARK_CANCELLED),
                ("lock_in_flight", _LOCK_IN_FLIGHT),
                ("lock_queued", _LOCK_QUEUED),
                ("cancel_queued", _CANCEL_QUEUED),
                ("stop_running", _STOP_RUNNING),
                ("stop_unleased", _STOP_UNLEASED),
            )
        }

    async def backfill(
        self,
        task_id: UUID,
        backfill_id: UUID,
        occurrences: Sequence[datetime],
        overlap: BackfillOverlap,
        only_missing: bool,
        now: datetime,
        replica: str,
        dry_run: bool,
        *,
        span: tuple[datetime, datetime] | None = None,
        actor: str | None = None,
    ) -> Backfill:
        async with self._transaction() as conn:
            cur = conn.cursor(row_factory=dict_row)
            # A dry run writes nothing and locks nothing; a backfill locks its task row
            # before its lease lock, as a claim does.
            await cur.execute(self._q["get_task" if dry_run else "lock_task"], {"id": task_id})
            row = await cur.fetchone()
            if row is None:
                raise TaskNotFound(task_id)
            task = to_task(row)
            await lock_leases(conn, self._q, self._schema, [task_id])
            kept = list(occurrences)
            if only_missing and kept:
                params = {"task_id": task_id, "occurrences": kept}
                done = await conn.execute(self._sql["succeeded"], params)
                kept = missing(kept, [at for (at,) in await done.fetchall()])
            heads = [(task, task.max_running_instances)]
            read = (await read_slots(conn, self._q, heads, now, BACKFILL_QUEUE_BOUND))[task_id]
            slot_plan = backfill_plan(overlap, read.slots, len(kept))
            runs = [
                backfill_run(task, now, replica, placement, at, backfill_id)
                for at, placement in zip(kept, slot_plan.placements, strict=True)
            ]
            made = [ClaimedRun(task=task, run=run) for run in runs]
            if dry_run:
                return Backfill(backfill_id, kept, made, [])  # read only: nothing written
            writes = SlotWrites()
            writes.start_runs(task, read.heads[: slot_plan.start_queued], now, replica)
            started_cur = await writes.write(conn, self._q, now)
            if runs:
                await conn.execute(self._sql["insert"], _insert_params(task_id, backfill_id, runs))
            placed = Backfill(backfill_id, kept, made, [])
            record = new_record(task, placed, span, overlap, only_missing, now, actor)
            await conn.execute(self._sql["insert_record"], _record_params(record))
            if record.status == "finished":  # nothing of it waits: finished at once
                state = BackfillState(record, Counter(c.run.status for c in made))
                await raise_finished(conn, self._ends, self._schema, self._rules, [(state, now)])
        return Backfill(backfill_id, kept, made, await writes.started(started_cur))

    async def get_backfill(self, backfill_id: UUID) -> BackfillState:
        async with self._transaction() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(self._sql["record"], {"backfill_id": backfill_id})
            row = await cur.fetchone()
            if row is None:
                raise BackfillNotFound(backfill_id)
            counted = await conn.execute(self._sql["counts"], {"backfill_id": backfill_id})
            counts = {RunStatus(status): n for status, n in await counted.fetchall()}
        return BackfillState(BackfillRecord(**row), Counter(counts))

    async def cancel_backfill(self, backfill_id: UUID, now: datetime) -> int:
        key = {"backfill_id": backfill_id}
        async with self._transaction() as conn:
            # The locks in the order _LOCK_IN_FLIGHT gives, and the backfill's row last:
            # the order a transaction ending its runs takes them
            # (adapters.postgres.backfill_ends). The runs in flight are read again once
            # the queued runs are held: one a batch started meanwhile is stopped too.
            await conn.execute(self._sql["lock_in_flight"], key)
            waiting = await conn.execute(self._sql["lock_queued"], key)
            in_flight = await conn.execute(self._sql["lock_in_flight"], key)
            queued = len(await waiting.fetchall())
            running = [run_id for (run_id,) in await in_flight.fetchall()]
            locked = conn.cursor(row_factory=dict_row)
            await locked.execute(self._sql["lock_record"], key)
            found = await locked.fetchone()
            if found is None:
                raise BackfillNotFound(backfill_id)
            record = BackfillRecord(**found)
            params = {"backfill_id": backfill_id, "now": now, "error": CANCELLED_BY_BACKFILL}
            await conn.execute(self._sql["cancel_queued"], params)
            params = {"backfill_id": backfill_id, "now": now, "reason": STOPPED_BY_BACKFILL}
            unleased = await conn.execute(self._sql["stop_unleased"], params)
            if running:
                params = {"run_ids": running, "reason": STOPPED_BY_BACKFILL}
                await conn.execute(self._sql["stop_running"], params)
            running += [run_id for (run_id,) in await unleased.fetchall()]
            if running:
                await self._wake_cancels(conn, running)
            if record.status == "active" and (queued or running):
                params = {"backfill_id": backfill_id, "now": now}
                await conn.execute(self._sql["mark_cancelled"], params)
                counts = (await counts_of(conn, self._ends, [backfill_id]))[backfill_id]
                cancelled = dataclasses.replace(record, status="cancelled", finished_at=now)
                state = BackfillState(cancelled, counts)
                await raise_finished(conn, self._ends, self._schema, self._rules, [(state, now)])
        return queued + len(running)


def _insert_params(task_id: UUID, backfill_id: UUID, runs: list[Any]) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "backfill_id": backfill_id,
        "claimed_at": runs[0].claimed_at,
        "replica": runs[0].replica,
        "ids": [r.id for r in runs],
        "scheduled_for": [r.scheduled_for for r in runs],
        "started_at": [r.started_at for r in runs],
        "finished_at": [r.finished_at for r in runs],
        "lease_expires_at": [r.lease_expires_at for r in runs],
        "status": [r.status.value for r in runs],
    }


def _record_params(record: BackfillRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "task_id": record.task_id,
        "task_name": record.task_name,
        "start": record.start,
        "end": record.end,
        "overlap": record.overlap,
        "only_missing": record.only_missing,
        "created_at": record.created_at,
        "actor": record.actor,
        "runs": record.runs,
        "status": record.status,
        "finished_at": record.finished_at,
    }
