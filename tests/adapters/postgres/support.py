"""Builders and probes shared by the PostgreSQL adapter's tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from tests.fixtures.waiting import eventually

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)


async def query(url: str, statement: str, schema: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run `statement` (with `{schema}` for the test schema) on a connection of its own."""
    composed = sql.SQL(statement).format(schema=sql.Identifier(schema))  # type: ignore[arg-type]
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
