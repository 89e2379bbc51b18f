"""Ending runs on PostgreSQL: recording outcomes in a batch, failing the runs whose
lease expired, and starting the queued runs either frees a slot for."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from psycopg.rows import dict_row

from adapters.postgres.events import read_task_refs, task_counts, task_refs, write_events
from adapters.postgres.finishing import OutcomeBatch, counted_tasks
from adapters.postgres.rows import to_run
from adapters.postgres.slots import SlotWrites
from adapters.postgres.transactions import PostgresStoreBase, log
from adapters.run_ends import RunEndsBase
from application.ports import Freed
from domain.errors import CommitUnanswered
from domain.events import outcome_events
from domain.instants import truncate
from domain.overlap import PAUSED
from domain.runs import REPLICA_LOST, RunOutcome


class RunEnds(PostgresStoreBase, RunEndsBase):
    """The outcomes and lost-lease sweep of `PostgresTaskStore`."""

    async def _finish_runs(
        self, outcomes: Sequence[tuple[UUID, RunOutcome]], starting: tuple[datetime, str] | None
    ) -> Freed:
        """Two round trips, whatever the size of the batch: (BEGIN, lock the tasks
        whose count may change, finish the runs), (count on the tasks, read the runs
        that were not running, COMMIT); one more when a task of the batch has queued
        runs to start (`_refill`) or, without `starting`, when the batch pauses a task
        that has queued runs (they are cancelled, and their backfills may end)."""
        batch = OutcomeBatch.of(outcomes)
        if not batch:
            return Freed([], [])
        params = batch.params()
        paused: list[UUID] = []
        paused_at: dict[UUID, datetime] = {}  # the tasks this batch paused, and when
        writes: SlotWrites | None = None
        try:
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
                        paused_at = {
                            t: at
                            for t, at, p in zip(
                                counted["task_ids"],
                                counted["updated_at"],
                                counted["paused"],
                                strict=True,
                            )
                            if p
                        }
                        paused = list(paused_at)
                events = outcome_events(
                    self._rules, await task_refs(refs), task_counts(locked), ended
                )
                await write_events(conn, self.schema, events)
                missing = [run_id for run_id in batch.outcomes if run_id not in runs]
                if missing:
                    unchanged = conn.cursor(row_factory=dict_row)
                    await unchanged.execute(self._q["get_runs"], {"ids": missing}, binary=True)
                writes, started = await self._queues.refill(conn, queueing, starting, paused)
                if starting is None:  # no refill cancels a paused task's queue: its pause does
                    with_queue = {row["id"] for row in locked if row["queueing"]}
                    for task_id, at in paused_at.items():
                        if task_id in with_queue:  # else no statement, no round trip
                            await self._queues.drop(conn, [task_id], PAUSED, at)
                await self._queues.settle(conn, ended, writes)
        except CommitUnanswered:
            freed = await self._after_unanswered(writes, [run_id for run_id, _ in outcomes])
            if freed is None:
                raise
            return freed
        if missing:  # read in the transaction, fetched after its COMMIT
            runs.update((row["id"], to_run(row)) for row in await unchanged.fetchall())
        ordered = [runs[run_id] for run_id, _ in outcomes if run_id in runs]
        return Freed(ordered, await writes.started(started))

    async def _expire_lost_runs(
        self, now: datetime, starting: tuple[datetime, str] | None
    ) -> Freed:
        writes: SlotWrites | None = None
        try:
            async with self._transaction() as conn:
                cur = conn.cursor(row_factory=dict_row)
                await cur.execute(
                    self._q["expire_lost_runs"],
                    {"now": now, "finished_at": truncate(now), "error": REPLICA_LOST},
                )
                # Sent with it, no round trip of its own: requests of runs now ended.
                await conn.execute(self._q["forget_cancels"])
                lost = [to_run(row) for row in await cur.fetchall()]
                if lost:
                    refs = await read_task_refs(
                        conn, self.schema, self._rules, [r.id for r in lost]
                    )
                    events = outcome_events(self._rules, await task_refs(refs), {}, lost)
                    await write_events(conn, self.schema, events)
                queueing = await self._queues.send_queued_tasks(
                    conn, [run.id for run in lost], starting
                )
                writes, started = await self._queues.refill(conn, queueing, starting, [])
                await self._queues.settle(conn, lost, writes)
        except CommitUnanswered:
            freed = await self._after_unanswered(writes, [])
            if freed is None:
                raise
            return freed
        return Freed(lost, await writes.started(started))

    async def _after_unanswered(
        self, writes: SlotWrites | None, run_ids: list[UUID]
    ) -> Freed | None:
        """What the transaction did, when its COMMIT went unanswered and it had started
        queued runs: those runs, found written, are this replica's to call (else they
        would wait uncalled for their leases to end them "replica lost"). None when it
        started none, or they are not there: the outcomes are recorded again (a run
        already ended is left as it is)."""
        if writes is None or not writes.start:
            return None
        landed = await self._landed(list(writes.start) + run_ids)
        started = [] if landed is None else writes.started_among(landed)
        if landed is None or not started:
            return None
        log.warning(
            "a COMMIT went unanswered, but it was written: %d queued runs go on", len(started)
        )
        return Freed([landed[run_id] for run_id in run_ids if run_id in landed], started)
