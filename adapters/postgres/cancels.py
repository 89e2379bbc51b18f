"""Cancelling runs on PostgreSQL: asking a run to stop (a queued one is cancelled at
once), and reading which runs were asked and why. A request is written on the run's
lease, or in run_cancels when the lease went with the run's deleted task."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from uuid import UUID

from psycopg.rows import dict_row

from adapters.postgres.rows import to_run
from adapters.postgres.transactions import PostgresStoreBase
from domain.errors import RunNotFound, RunNotRunning
from domain.runs import Run, RunStatus


class Cancels(PostgresStoreBase):
    """The cancel requests of `PostgresTaskStore`."""

    async def request_cancel(self, run_id: UUID, reason: str | None = None) -> Run:
        async with self._transaction() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(self._q["lock_run"], {"id": run_id})
            row = await cur.fetchone()
            if row is None:
                raise RunNotFound(run_id)
            run = to_run(row)
            if run.status is RunStatus.QUEUED:
                return await self._queues.cancel_queued(conn, run, reason)
            if run.status is not RunStatus.RUNNING:
                raise RunNotRunning(run_id, run.status.value)
            params = {"id": run_id, "reason": reason, "now": datetime.now(UTC)}
            await conn.execute(self._q["request_cancel"], params)
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
