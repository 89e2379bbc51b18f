"""Starting runs on PostgreSQL: claiming due tasks a batch at a time (leases counted
under advisory locks), and manual runs."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import dict_row
from pydantic import ValidationError

from adapters.postgres.calendars import claim_calendars
from adapters.postgres.claiming import ClaimBatch, manual_run_params
from adapters.postgres.events import write_events
from adapters.postgres.rows import to_run, to_task
from adapters.postgres.slots import (
    SlotRead,
    SlotWrites,
    count_leases,
    lock_leases,
    place_claim,
)
from adapters.postgres.transactions import PostgresStoreBase, Row
from domain.claims import claim, claimed_task_fields
from domain.errors import CommitUnanswered, TaskNotFound
from domain.events import claim_events
from domain.manual_runs import manual_run
from domain.overlap import Slots
from domain.runs import ClaimedRun, Run
from domain.tasks import Task

# The store's logger, named as before the store was split into parts.
log = logging.getLogger("adapters.postgres.store")


class RunStarts(PostgresStoreBase):
    """The claims and manual runs of `PostgresTaskStore`."""

    async def claim_due(self, now: datetime, limit: int, replica: str) -> list[ClaimedRun]:
        claimed: list[ClaimedRun] = []
        batch = ClaimBatch()
        writes = SlotWrites()
        try:
            return await self._claim(now, limit, replica, claimed, batch, writes)
        except CommitUnanswered:
            # Claimed runs that landed and were not called would hold their slots until
            # their leases expire, then end "replica lost": look for them, call them.
            landed = await self._landed([c.run.id for c in claimed[:1]] + list(writes.start))
            if landed is None:
                raise
            started = writes.started_among(landed)
            if not started and not any(c.run.id in landed for c in claimed):
                raise
            log.warning(
                "a claim's COMMIT went unanswered, but it was written: its %d runs go on",
                len(claimed) + len(started),
            )
            return started + claimed

    async def _claim(
        self,
        now: datetime,
        limit: int,
        replica: str,
        claimed: list[ClaimedRun],
        batch: ClaimBatch,
        writes: SlotWrites,
    ) -> list[ClaimedRun]:
        async with self._transaction() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(self._q["claim_due"], {"now": now, "limit": limit}, binary=True)
            tasks = [t for row in await cur.fetchall() if (t := valid_task(row)) is not None]
            calendars = await claim_calendars(conn, self._c, self._calendar_cache, tasks)
            decided = [(task, claim(task, now, calendars)) for task in tasks]
            reads = await self._queues.claim_slots(conn, decided, now)
            for task, decision in decided:
                if decision is None:
                    # next_run_at disagrees with next_fire_at (a hand edit?): mended.
                    batch.add(task.id, claimed_task_fields(task, None, None))
                    continue
                # catch_up "all": each earlier occurrence a run of its own, first.
                occurrences = [
                    *((e.status, e.scheduled_for, e.coalesced, e.error) for e in decision.earlier),
                    (decision.status, decision.scheduled_for, decision.coalesced, None),
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
            if writes.cancelled:  # a queued run replaced may have been a backfill's last
                await self._queues.settle(conn, [], writes)
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
        await lock_leases(conn, self._q, self.schema, task_ids)
        return await count_leases(conn, self._q, task_ids, now)

    async def start_manual_run(
        self, task_id: UUID, now: datetime, replica: str, busy: str | None = None
    ) -> ClaimedRun:
        made: list[ClaimedRun] = []
        try:
            return await self._start_manual_run(task_id, now, replica, busy, made)
        except CommitUnanswered:
            # Answered 503, the run would wait uncalled for its lease to end it.
            landed = await self._landed([manual.run.id for manual in made])
            if not landed:
                raise
            log.warning("a manual run's COMMIT went unanswered, but it was written: it goes on")
            return made[0]

    async def renew_lease(self, run: Run, now: datetime, expires_at: datetime) -> Run | None:
        params = {
            "run_id": run.id,
            "scheduled_for": run.scheduled_for,
            "now": now,
            "expires_at": expires_at,
        }
        async with self._transaction() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(self._q["renew_lease"], params)
            row = await cur.fetchone()
        return None if row is None else to_run(row)

    async def _start_manual_run(
        self, task_id: UUID, now: datetime, replica: str, busy: str | None, made: list[ClaimedRun]
    ) -> ClaimedRun:
        async with self._transaction() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(self._q["get_task"], {"id": task_id})
            leases = await self._lease_counts(conn, [task_id], now)
            row = await cur.fetchone()
            if row is None:
                raise TaskNotFound(task_id)
            task = to_task(row)
            run = manual_run(task, now, replica, leases.get(task_id, 0), busy)
            await conn.execute(self._q["record_manual_run"], manual_run_params(run))
            manual = ClaimedRun(task=task, run=run)
            made.append(manual)
            await write_events(conn, self.schema, claim_events(self._rules, [manual]))
        return manual


def valid_task(row: Row) -> Task | None:
    """The task of a locked row, or None (logged) when it no longer validates: one bad
    row must not stop every claim."""
    try:
        return to_task(row)
    except ValidationError as exc:
        log.error("task %s does not validate and is not claimed: %s", row.get("id"), exc)
        return None
