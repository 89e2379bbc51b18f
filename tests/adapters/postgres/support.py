"""Builders and probes shared by the PostgreSQL adapter's tests."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from adapters.postgres import PostgresTaskStore, create_pool
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.waiting import eventually

R = TypeVar("R")

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)


async def query(url: str, statement: str, schema: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run `statement` (with `{schema}` for the test schema) on a connection of its own."""
    composed = sql.SQL(statement).format(schema=sql.Identifier(schema))
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(composed, params)
        return await cur.fetchall() if cur.description else []


def round_trips(trace: str) -> int:
    """How many times the client waited for the server: each switch from frontend
    messages to backend messages in a libpq protocol trace."""
    waits, previous = 0, None
    for line in trace.splitlines():
        parts = line.split("\t")
        if len(parts) < 2 or parts[1] not in ("F", "B"):
            continue
        if previous == "F" and parts[1] == "B":
            waits += 1
        previous = parts[1]
    return waits


@dataclass
class OneConnection:
    """A store on a pool of one connection, never checked: every message of a call is on
    that connection, so a trace of it counts the call's round trips."""

    pool: AsyncConnectionPool[Any]
    store: PostgresTaskStore

    async def round_trips(self, call: Callable[[], Awaitable[R]]) -> tuple[R, int]:
        """What `call` returns, and how many round trips it cost (`round_trips`)."""
        with tempfile.TemporaryFile("w+") as trace:
            async with self.pool.connection() as conn:
                conn.pgconn.trace(os.dup(trace.fileno()))
            result = await call()
            async with self.pool.connection() as conn:
                conn.pgconn.untrace()
            trace.seek(0)
            return result, round_trips(trace.read())


@asynccontextmanager
async def one_connection(backend: PostgresBackend) -> AsyncIterator[OneConnection]:
    pool = create_pool(backend.url, min_size=1, max_size=1, check=False)
    await pool.open(wait=True)
    try:
        yield OneConnection(pool, PostgresTaskStore(pool, backend.schema))
    finally:
        await pool.close()


async def kill_idle_connections(url: str, schema: str) -> int:
    """Terminate the idle client backends of the test's own database (never another's:
    the server is shared) and wait until they have exited; how many there were."""
    rows = await query(
        url,
        "SELECT pid FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND state = 'idle' AND backend_type = 'client backend'",
        schema,
    )
    pids = [pid for (pid,) in rows]
    await query(url, "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", schema, pids)

    async def exited() -> bool:
        left = await query(
            url, "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", schema, pids
        )
        return left == [(0,)]

    await eventually(exited)
    return len(pids)


async def waiting(backend: PostgresBackend, count: int = 1) -> bool:
    """Whether `count` statements on this test's schema wait for locks others hold."""
    rows = await query(
        backend.url,
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND datname = current_database() AND strpos(query, %s) > 0",
        backend.schema,
        backend.schema,
    )
    return bool(rows[0][0] >= count)
