"""Carrying out `domain.overlap` slot plans in PostgreSQL: reading a task's slots under
its lease lock, and gathering what the plans decided (queued runs started, runs asked
to stop, queued runs cancelled) into the arrays of one statement each.

The decisions are the domain's (`plan`, `start_fields`, `replaced_by`, `dropped_queue`);
this module only reads and writes. Statements go out in the caller's pipelined
transaction; the runs it started are read once the transaction committed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection, AsyncCursor
from psycopg.rows import dict_row

from adapters.postgres.advisory import lease_lock_key
from adapters.postgres.rows import to_run
from domain.claims import new_run
from domain.overlap import (
    Placement,
    QueueDrop,
    Slots,
    cancelled_fields,
    dropped_queue,
    plan,
    queue_count_bound,
    replaced_by,
    starts_as_claimed,
)
from domain.overlap import start_fields as domain_start_fields
from domain.runs import ClaimedRun, Run, RunStatus
from domain.tasks import Task

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class SlotRead:
    """A task's slots as `task_slots` read them: the counts, and the ids the plan may
    touch (runs in flight nobody asked to stop, oldest first; the queue's head)."""

    slots: Slots
    stoppable: list[UUID]
    heads: list[UUID]


async def lock_leases(
    conn: AsyncConnection[Any], q: dict[str, bytes], schema: str, ids: Iterable[UUID]
) -> None:
    """Take the lease locks of these tasks, sorted (so no two callers wait in a cycle)."""
    keys = sorted({lease_lock_key(schema, task_id) for task_id in ids})
    if keys:
        await conn.execute(q["lock_leases"], {"keys": keys})


async def count_leases(
    conn: AsyncConnection[Any], q: dict[str, bytes], task_ids: list[UUID], now: datetime
) -> dict[UUID, int]:
    """The unexpired leases of these tasks (those with none left out), counted in a
    statement of its own once their lease locks are held (`lock_leases`), so that its
    snapshot sees every lease committed before. Planned at each call, never prepared:
    queries.sql, count_leases, says why."""
    params = {"task_ids": task_ids, "now": now}
    cur = await conn.execute(q["count_leases"], params, prepare=False)
    return {task_id: count for task_id, count in await cur.fetchall()}


async def read_slots(
    conn: AsyncConnection[Any],
    q: dict[str, bytes],
    tasks: Sequence[tuple[Task, int]],
    now: datetime,
    bound: int | None = None,
) -> dict[UUID, SlotRead]:
    """The slots of `tasks` (each with how many queue heads its plan may need), read in a
    statement of its own once their lease locks are held; each queue counted up to
    `bound` (by default `domain.overlap.queue_count_bound`)."""
    if not tasks:
        return {}
    params = {
        "task_ids": [task.id for task, _ in tasks],
        "bound": [queue_count_bound(task) if bound is None else bound for task, _ in tasks],
        "heads": [heads for _, heads in tasks],
        "now": now,
    }
    cur = conn.cursor(row_factory=dict_row)
    # Planned each time, as count_leases is (queries.sql): never a stale generic plan.
    await cur.execute(q["task_slots"], params, binary=True, prepare=False)
    limits = {task.id: task.max_running_instances for task, _ in tasks}
    return {row["id"]: _slot_read(row, limits[row["id"]]) for row in await cur.fetchall()}


def _slot_read(row: Row, limit: int) -> SlotRead:
    slots = Slots(
        limit=limit,
        in_flight=row["in_flight"],
        queued=row["queued"],
        replaceable=len(row["stoppable"]),
    )
    return SlotRead(slots, list(row["stoppable"]), list(row["heads"]))


@dataclass(slots=True)
class SlotWrites:
    """What slot plans decided to write, gathered for one statement each."""

    tasks: dict[UUID, Task] = field(default_factory=dict)  # of the runs started
    start: dict[UUID, dict[str, Any]] = field(default_factory=dict)  # run id -> start_fields
    cancel: dict[UUID, str] = field(default_factory=dict)  # queued run id -> error
    stop: dict[UUID, str] = field(default_factory=dict)  # run in flight -> reason
    drop: dict[QueueDrop, list[UUID]] = field(default_factory=dict)  # what goes -> tasks
    # The cancels `write` sent whose rows may be runs of backfills (see `backfilled`).
    cancelled: list[AsyncCursor[Row]] = field(default_factory=list)

    def start_runs(self, task: Task, run_ids: Iterable[UUID], now: datetime, replica: str) -> None:
        for run_id in run_ids:
            self.tasks[run_id] = task
            self.start[run_id] = domain_start_fields(task, now, replica)

    def drop_queue(self, task: Task, drop: QueueDrop) -> None:
        self.drop.setdefault(drop, []).append(task.id)

    async def write(
        self, conn: AsyncConnection[Any], q: dict[str, bytes], now: datetime
    ) -> AsyncCursor[Row] | None:
        """Send every write; the cursor whose rows are the runs started (read them after
        COMMIT with `started`), None when none start."""
        for drop, task_ids in self.drop.items():
            dropped = await cancel_queues(conn, q, task_ids, drop, now)
            if drop.backfilled:
                self.cancelled.append(dropped)
        if self.cancel:
            params = {"run_ids": list(self.cancel), "errors": list(self.cancel.values())}
            replaced = conn.cursor(row_factory=dict_row)
            await replaced.execute(q["cancel_queued_runs"], params | {"now": now})
            self.cancelled.append(replaced)
        cur = None
        if self.start:
            fields = list(self.start.values())
            cur = conn.cursor(row_factory=dict_row)
            params = {"run_ids": list(self.start)}
            for name in ("started_at", "lease_expires_at", "replica"):
                params[name] = [f[name] for f in fields]
            await cur.execute(q["start_queued"], params, binary=True)
        if self.stop:
            params = {"run_ids": list(self.stop), "reasons": list(self.stop.values())}
            await conn.execute(q["ask_to_stop"], params)
        return cur

    async def backfilled(self) -> list[Run]:
        """The queued runs `write` cancelled that backfills made, read in the
        transaction: it may have ended those backfills (`adapters.postgres.backfill_ends`).
        No round trip when it cancelled none that could be."""
        rows = [row for cur in self.cancelled for row in await cur.fetchall()]
        return [run for run in map(to_run, rows) if run.backfill_id is not None]

    def started_among(self, landed: dict[UUID, Run]) -> list[ClaimedRun]:
        """The queued runs `write` started, among those read back after a COMMIT went
        unanswered: running with the lease given here (another replica may have started
        one since, had this transaction not landed)."""
        return [
            ClaimedRun(self.tasks[run_id], run)
            for run_id, fields in self.start.items()
            if (run := landed.get(run_id)) is not None
            and run.status is RunStatus.RUNNING
            and run.replica == fields["replica"]
            and run.lease_expires_at == fields["lease_expires_at"]
        ]

    async def started(self, cur: AsyncCursor[Row] | None) -> list[ClaimedRun]:
        if cur is None:
            return []
        runs = [to_run(row) for row in await cur.fetchall()]
        return [ClaimedRun(task=self.tasks[run.id], run=run) for run in runs]


async def refill(
    conn: AsyncConnection[Any],
    q: dict[str, bytes],
    schema: str,
    tasks: Sequence[Task],
    now: datetime,
    replica: str,
    paused: Iterable[UUID] = (),
) -> SlotWrites:
    """Plan the start of queued runs in the slots freed on `tasks` (each has a queue):
    lock, read, decide. A task that may no longer keep a queue, or that this very
    transaction paused (`paused`), has it cancelled instead. The caller sends the
    writes (`SlotWrites.write`)."""
    writes = SlotWrites()
    stopped = set(paused)
    keeping = []
    for task in tasks:
        gone = task.model_copy(update={"enabled": False}) if task.id in stopped else task
        drop = dropped_queue(gone)
        if drop is not None:
            writes.drop_queue(task, drop)
        if drop is None or not drop.backfilled:
            keeping.append(task)
    await lock_leases(conn, q, schema, (task.id for task in keeping))
    read = await read_slots(conn, q, [(t, t.max_running_instances) for t in keeping], now)
    for task in keeping:
        slot = read[task.id]
        count = plan(task.overlap, slot.slots, []).start_queued
        writes.start_runs(task, slot.heads[:count], now, replica)
    return writes


async def cancel_queues(
    conn: AsyncConnection[Any],
    q: dict[str, bytes],
    task_ids: list[UUID],
    drop: QueueDrop,
    now: datetime,
) -> AsyncCursor[Row]:
    """Cancel the queued runs of these tasks that `drop` names; the cursor's rows are
    those of them a backfill made."""
    params = {"task_ids": task_ids, "now": now, "error": drop.error}
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(q["cancel_task_queues"], params | {"backfilled": drop.backfilled})
    return cur


def place_claim(
    task: Task,
    occurrences: Sequence[tuple[RunStatus, datetime, int, str | None]],
    read: SlotRead,
    now: datetime,
    replica: str,
    writes: SlotWrites,
) -> list[Run]:
    """Carry out the slot plan of one claim of `task`: the queued runs it starts go to
    `writes`, and the runs of `occurrences` (status, scheduled_for, coalesced, oldest
    first, and a MISSED one's reason if not the grace's) are returned as placed, for
    `record_claims`."""
    statuses = [status for status, _, _, _ in occurrences]
    if starts_as_claimed(read.slots, statuses):  # a default task's claim: nothing to plan
        status, scheduled_for, coalesced, error = occurrences[0]
        return [new_run(task, now, replica, status, scheduled_for, coalesced, error=error)]
    slot_plan = plan(task.overlap, read.slots, statuses)
    started = read.heads[: slot_plan.start_queued]
    writes.start_runs(task, started, now, replica)
    stoppable = deque([*read.stoppable, *started])
    waiting: deque[UUID] = deque(read.heads[slot_plan.start_queued :])
    runs: dict[UUID, Run] = {}
    for (status, scheduled_for, coalesced, error), placement in zip(
        occurrences, slot_plan.placements, strict=True
    ):
        placed = status if placement is None else placement.status
        run = new_run(task, now, replica, placed, scheduled_for, coalesced, error=error)
        runs[run.id] = run
        if placement is Placement.REPLACE_RUNNING:
            writes.stop[stoppable.popleft()] = replaced_by(run.id)
        elif placement is Placement.REPLACE_QUEUED:
            victim = waiting.popleft()
            if victim in runs:  # queued by this very claim
                runs[victim] = runs[victim].model_copy(
                    update=cancelled_fields(now, replaced_by(run.id))
                )
            else:
                writes.cancel[victim] = replaced_by(run.id)
        if placement is Placement.START:
            stoppable.append(run.id)
        elif placed is RunStatus.QUEUED:
            waiting.append(run.id)
    return list(runs.values())
