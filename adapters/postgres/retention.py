"""Retention on PostgreSQL: deleting, a batch at a time, the history and the runs older
than a cutoff, and the runs past their task's `history_limit`."""

from __future__ import annotations

from datetime import datetime

from adapters.postgres.transactions import PostgresStoreBase
from domain.retention import HistoryCount, history_trim


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

    async def delete_runs_over_limit(self, batch: int) -> int:
        async with self._transaction() as conn:
            cur = await conn.execute(self._q["history_counts"], {"batch": batch})
            counts = [HistoryCount(*row) for row in await cur.fetchall()]
            trim = history_trim(counts, batch)
            if not trim:
                return 0
            cur = await conn.execute(
                self._q["delete_oldest_finished"],
                {"task_ids": list(trim), "counts": list(trim.values())},
            )
        return max(cur.rowcount, 0)
