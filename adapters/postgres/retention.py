"""Retention on PostgreSQL: deleting, a batch at a time, the history and the runs older
than a cutoff."""

from __future__ import annotations

from datetime import datetime

from adapters.postgres.transactions import PostgresStoreBase


class Retention(PostgresStoreBase):
    """The retention deletes of `PostgresTaskStore`."""

    async def delete_history_before(self, cutoff: datetime, batch: int) -> int:
        async with self._transaction() as conn:
            cur = await conn.execute(
                self._q["delete_history_before"], {"cutoff": cutoff, "batch": batch}
            )
        return max(cur.rowcount, 0)

    async def delete_runs_before(self, cutoff: datetime, batch: int) -> int:
        async with self._transaction() as conn:
            cur = await conn.execute(
                self._q["delete_runs_before"], {"cutoff": cutoff, "batch": batch}
            )
        return max(cur.rowcount, 0)
