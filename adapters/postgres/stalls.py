"""Ending the transactions that a stopped replica left open (docs/reliability.md,
"A replica stopped mid-transaction").

A replica stopped (SIGSTOP, a frozen VM, a debugger) while a claim transaction is open
keeps that transaction's locks for as long as it stays stopped: up to a batch of task
rows, which every other replica's claim then skips, so those tasks do not fire at all.
PostgreSQL's own timeouts do not end it: the statement finished, and in pipeline mode
the backend waits for the rest of the pipeline as "active", never "idle in transaction".
So every replica's lost-run sweep ends, with `pg_terminate_backend`, the transactions
of this scheduler's connections (its `application_name`, the same role) open longer
than the limit. What such a transaction did rolls back: a claim that never committed
called nothing, and the stopped replica finds its connection gone when it wakes.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from adapters.postgres.pool import application_name
from adapters.postgres.transactions import PostgresStoreBase

log = logging.getLogger("adapters.postgres.store")

_END_STALLED = """
SELECT pid, now() - xact_start AS age, pg_terminate_backend(pid) AS ended
FROM pg_stat_activity
WHERE datname = current_database() AND usename = current_user
  AND application_name = %(name)s AND pid <> pg_backend_pid()
  AND xact_start < now() - %(older_than)s::interval
"""


class Stalls(PostgresStoreBase):
    """The stalled-transaction sweep of `PostgresTaskStore`."""

    async def end_stalled_transactions(self, older_than: timedelta) -> int:
        params = {"name": application_name(self.schema), "older_than": older_than}
        async with self._connection() as conn:
            rows = await (await conn.execute(_END_STALLED, params)).fetchall()
        for pid, age, ended in rows:
            log.warning(
                "ended a transaction open %.0f s on backend %s: a replica stopped while it "
                "held locks%s",
                age.total_seconds(),
                pid,
                "" if ended else " (could not end it)",
            )
        return sum(1 for _, _, ended in rows if ended)
