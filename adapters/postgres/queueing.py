"""The steps of the store's transactions that deal with queued runs (docs/policies.md,
"Overlap"), apart from the rest of each transaction: reading the claimed tasks' slots,
starting queued runs in the slots a transaction freed, cancelling queues, and finishing
the backfills whose last runs a transaction ended (`backfill.finished`, docs/events.md).

Each step sends its statements in the caller's pipelined transaction; what to write is
the domain's (`domain.overlap`, carried out by `adapters.postgres.slots`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection, AsyncCursor
from psycopg.rows import dict_row

from adapters.postgres import backfill_ends
from adapters.postgres.rows import to_run
from adapters.postgres.slots import (
    SlotRead,
    SlotWrites,
    cancel_queues,
    count_leases,
    lock_leases,
    read_slots,
    refill,
)
from domain.claims import ClaimDecision
from domain.events import EventRules
from domain.instants import truncate
from domain.overlap import (
    CANCELLED_BY_REQUEST,
    QueueDrop,
    Slots,
    cancelled_fields,
    claim_reads_queue,
)
from domain.runs import Run, RunStatus
from domain.tasks import Task

Row = dict[str, Any]


class Queues:
    """The queue steps of one store (its bound queries and schema)."""

    def __init__(
        self,
        q: dict[str, bytes],
        schema: str,
        parse: Callable[[Row], Task | None],
        rules: EventRules,
        ends: dict[str, bytes],
    ) -> None:
        self._q = q
        self._schema = schema
        self._parse = parse  # a task row, or None (logged) when it does not validate
        self._rules = rules
        self._ends = ends  # adapters.postgres.backfill_ends.statements

    async def settle(
        self, conn: AsyncConnection[Any], ended: Iterable[Run], writes: SlotWrites | None = None
    ) -> None:
        """Finish the backfills that the `ended` runs, and the queued runs `writes`
        cancelled, may have ended, in the caller's transaction after it ended them."""
        runs = [*ended, *(await writes.backfilled() if writes is not None else [])]
        await backfill_ends.settle(conn, self._ends, self._schema, self._rules, runs)

    async def claim_slots(
        self,
        conn: AsyncConnection[Any],
        decided: list[tuple[Task, ClaimDecision | None]],
        now: datetime,
    ) -> dict[UUID, SlotRead]:
        """The slots of the claimed tasks, under their lease locks: for a task on
        `overlap: "skip"` only its leases are counted (`domain.overlap.claim_reads_queue`:
        as before there were queues); one that may queue has its whole `task_slots`
        read."""
        calling = []
        queueing = []
        for task, decision in decided:
            if decision is None:
                continue
            statuses = [e.status for e in decision.earlier] + [decision.status]
            if claim_reads_queue(task):
                queueing.append((task, task.max_running_instances + len(statuses)))
            elif RunStatus.RUNNING in statuses:
                calling.append(task.id)
        if not calling and not queueing:
            return {}
        await lock_leases(conn, self._q, self._schema, [*calling, *(t.id for t, _ in queueing)])
        reads = await read_slots(conn, self._q, queueing, now)
        if calling:
            limits = {task.id: task.max_running_instances for task, _ in decided}
            for task_id, count in (await count_leases(conn, self._q, calling, now)).items():
                reads[task_id] = SlotRead(Slots(limits[task_id], count), [], [])
        return reads

    async def send_queued_tasks(
        self,
        conn: AsyncConnection[Any],
        run_ids: list[UUID],
        starting: tuple[datetime, str] | None,
    ) -> AsyncCursor[Row] | None:
        """Send the read of the tasks of `run_ids` that have queued runs (read it with
        `refill`), when queued runs are to be started."""
        if starting is None or not run_ids:
            return None
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(self._q["queued_tasks_of_runs"], {"run_ids": run_ids}, binary=True)
        return cur

    async def refill(
        self,
        conn: AsyncConnection[Any],
        queueing: AsyncCursor[Row] | None,
        starting: tuple[datetime, str] | None,
        paused: list[UUID],
    ) -> tuple[SlotWrites, AsyncCursor[Row] | None]:
        """Start queued runs in the slots this transaction freed, on the replica of
        `starting` (a task this transaction `paused` has its queue cancelled instead)."""
        if queueing is None or starting is None:
            return SlotWrites(), None
        tasks = [task for row in await queueing.fetchall() if (task := self._parse(row))]
        if not tasks:
            return SlotWrites(), None
        now, replica = starting
        writes = await refill(conn, self._q, self._schema, tasks, now, replica, paused)
        return writes, await writes.write(conn, self._q, now)

    async def cancel_queued(
        self, conn: AsyncConnection[Any], run: Run, reason: str | None = None
    ) -> Run:
        """Cancel a queued run (locked by the caller) uncalled, at this process's clock,
        with the error `reason` (None: CANCELLED_BY_REQUEST); a backfill's last queued
        run ends its backfill."""
        now = truncate(datetime.now(UTC))
        error = reason or CANCELLED_BY_REQUEST
        params = {"run_ids": [run.id], "errors": [error], "now": now}
        await conn.execute(self._q["cancel_queued_runs"], params)
        cancelled = run.model_copy(update=cancelled_fields(now, error))
        await self.settle(conn, [cancelled])
        return cancelled

    async def drop(
        self,
        conn: AsyncConnection[Any],
        task_ids: list[UUID],
        drop: QueueDrop,
        at: datetime | None,
    ) -> None:
        """Cancel the queued runs of these tasks that `drop` names
        (`domain.overlap.dropped_queue`: paused, deleted, no longer queueing), in the
        caller's transaction, and finish the backfills whose last runs they were. A
        delete calls this before it deletes the tasks: a backfill's event is sent where
        its task said (`domain.backfills.finished_event`)."""
        if not task_ids:
            return
        now = truncate(at or datetime.now(UTC))
        cur = await cancel_queues(conn, self._q, task_ids, drop, now)
        if drop.backfilled:  # only then may a backfill's runs be among them
            await self.settle(conn, [to_run(row) for row in await cur.fetchall()])
