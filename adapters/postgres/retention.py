"""Retention on PostgreSQL: dropping the week partitions of runs wholly past the cutoff,
deleting, a batch at a time, the history and the runs older than a cutoff that are left,
and the runs past their task's `history_limit`."""

from __future__ import annotations

import logging
from datetime import datetime
from functools import cache
from typing import Any

import psycopg
from psycopg import sql

from adapters.postgres.initializer import schema_lock_key
from adapters.postgres.partitions import ensure_partitions, existing_partitions
from adapters.postgres.schemata import Table, read_schemata
from adapters.postgres.transactions import PostgresStoreBase
from domain.retention import HistoryCount, history_trim

log = logging.getLogger("adapters.postgres.store")

# How long making or dropping a partition waits for its lock before it gives up until the
# next sweep: the DDL itself takes milliseconds, but while it waits in line, reads and
# writes of runs wait behind it.
LOCK_TIMEOUT = "1s"


@cache
def runs_table() -> Table:
    """The runs table as schemata.toml declares it (its partitions among it)."""
    return next(table for table in read_schemata() if table.name == "runs")


class Retention(PostgresStoreBase):
    """The retention deletes of `PostgresTaskStore`."""

    async def drop_runs_before(self, cutoff: datetime, now: datetime) -> int:
        table = runs_table()
        if table.partitions is None:
            return 0
        dropped = 0
        # The initializer's lock: one replica (or init-db) at a time makes or drops
        # partitions; the others find it taken and leave it to that one.
        lock = sql.SQL("SELECT pg_try_advisory_xact_lock({})").format(
            sql.Literal(schema_lock_key(self.schema))
        )
        timeout = sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT))
        async with self._connection() as conn:
            try:
                async with conn.transaction():
                    if not await _scalar(conn, lock):
                        return 0
                    await conn.execute(timeout)
                    await ensure_partitions(conn, self.schema, table, now)
            except psycopg.errors.LockNotAvailable:
                log.info("runs partitions not made: the runs table stayed busy")
            parts = await existing_partitions(conn, self.schema, table.name)
        parent = sql.Identifier(self.schema, table.name)
        for part in parts:
            if part.default or part.upper is None or part.upper > cutoff:
                continue
            # A connection for each: the answer limit bounds one checkout, and a count
            # of a week's runs takes a while (adapters.postgres.silence).
            async with self._connection() as conn:
                name = sql.Identifier(self.schema, part.name)
                # Counted before the lock: a count of a week's runs takes a while.
                count = sql.SQL("SELECT count(*) FROM {}").format(name)
                runs = int(await _scalar(conn, count))
                try:
                    async with conn.transaction():
                        if not await _scalar(conn, lock):
                            break
                        await conn.execute(timeout)
                        # The parent first, as every query locks it, so no deadlock.
                        await conn.execute(
                            sql.SQL("LOCK TABLE ONLY {} IN ACCESS EXCLUSIVE MODE").format(parent)
                        )
                        # Queued and running runs are still to end: their week waits.
                        unfinished = sql.SQL(
                            "SELECT EXISTS (SELECT 1 FROM {} WHERE status = 'queued'"
                            " OR status = 'running')"
                        ).format(name)
                        if await _scalar(conn, unfinished):
                            continue
                        await conn.execute(sql.SQL("DROP TABLE {}").format(name))
                        dropped += runs
                        log.info(
                            "runs partition dropped",
                            extra={"partition": part.name, "count": runs, "cutoff": cutoff},
                        )
                except psycopg.errors.LockNotAvailable:
                    log.info(
                        "runs partition not dropped: the runs table stayed busy",
                        extra={"partition": part.name, "lock_timeout": LOCK_TIMEOUT},
                    )
                    break
        return dropped

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


async def _scalar(conn: psycopg.AsyncConnection[Any], query: sql.Composed) -> Any:
    cur = await conn.execute(query)
    row = await cur.fetchone()
    return row[0] if row else None
