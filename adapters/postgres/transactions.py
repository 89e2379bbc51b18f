"""What every part of `PostgresTaskStore` stands on: its pool, bound queries and
channels, transactions in pipeline mode, reads retried on a fresh connection, NOTIFY."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from adapters.postgres.errors import translated_errors
from adapters.postgres.events import PostgresOutbox
from adapters.postgres.pool import live_connection, pipelined_transaction
from adapters.postgres.queueing import Queues
from adapters.postgres.rows import to_run
from adapters.postgres.silence import DatabaseSilent, was_cut
from domain.calendars import StoredCalendar
from domain.errors import StoreUnavailable
from domain.events import EventRules
from domain.runs import Run

# The store's logger, named as before the store was split into parts.
log = logging.getLogger("adapters.postgres.store")
# Seconds before each look for the runs of a transaction whose COMMIT went unanswered.
_LANDED_PAUSES = (0.0, 0.5, 1.0, 2.0)

Row = dict[str, Any]


class PostgresStoreBase:
    """The state and plumbing the parts of the store share (set by
    `PostgresTaskStore.__init__`)."""

    _pool: AsyncConnectionPool[Any]
    schema: str
    _rules: EventRules
    _b: dict[str, bytes]  # adapters.postgres.backfill_ends.statements
    outbox: PostgresOutbox
    _q: dict[str, bytes]
    _c: dict[str, bytes]  # the calendar statements (adapters.postgres.calendars)
    _calendar_cache: dict[str, StoredCalendar]  # what the claim path read, by name
    _holding: asyncio.Lock  # the holds of this process, one at a time (hold_tasks)
    tasks_channel: str
    cancel_channel: str
    _queues: Queues

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        async with translated_errors(), live_connection(self._pool) as conn:
            yield conn

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncConnection[Any]]:
        """One transaction in pipeline mode (`pipelined_transaction`)."""
        async with self._connection() as conn, pipelined_transaction(conn):
            yield conn

    async def _one(self, query: str, params: dict[str, Any]) -> Row | None:
        rows = await self._all(query, params)
        return rows[0] if rows else None

    async def _all(self, query: str, params: dict[str, Any]) -> list[Row]:
        """Run the named read `query` (see `_read`)."""
        return await self._read(self._q[query], params)

    async def _read(self, query: bytes, params: dict[str, Any]) -> list[Row]:
        """Run one read. A connection that died while idle is skipped before use
        (`live_connection`); one found dead only when the read was sent (it died just
        then, or its network was cut) is retried on another, at most once per connection
        the pool can hold: reading twice is harmless; one shut for waiting past the
        answer limit (`adapters.postgres.silence`) is not. Writes are never retried: one
        may have reached the server."""
        attempts = self._pool.max_size + 1
        for attempt in range(1, attempts + 1):
            conn: AsyncConnection[Any] | None = None
            try:
                async with live_connection(self._pool) as conn:
                    cur = conn.cursor(row_factory=dict_row)
                    await cur.execute(query, params)
                    return await cur.fetchall()
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if conn is not None and was_cut(conn):  # silent: another would be too
                    raise DatabaseSilent("the database did not answer") from exc
                if attempt < attempts and conn is not None and conn.closed:
                    log.info("retrying a read on a new connection: %s", exc)
                    continue
                raise StoreUnavailable("the database is unavailable") from exc
        raise AssertionError("unreachable")

    async def _landed(self, run_ids: list[UUID]) -> dict[UUID, Run] | None:
        """After a COMMIT went unanswered (CommitUnanswered): those of `run_ids` that are
        stored, by id, as they are; None when the store still cannot say. Asked at once
        and again a few times over a few seconds (well within a lease) while it finds
        none: a server that had the COMMIT when the connection went still ends it, and
        it may not have yet when the first look comes."""
        if not run_ids:
            return None
        found: dict[UUID, Run] | None = None
        for pause in _LANDED_PAUSES:
            await asyncio.sleep(pause)
            try:
                rows = await self._read(self._q["get_runs"], {"ids": run_ids})
            except DatabaseSilent:  # it waited out the answer limit: asking again would too
                return found
            except StoreUnavailable:
                continue
            found = {run.id: run for run in map(to_run, rows)}
            if found:
                return found
        return found

    async def _notify(self, conn: AsyncConnection[Any], channel: str, payload: object) -> None:
        await conn.execute(self._q["notify"], {"channel": channel, "payload": str(payload)})
