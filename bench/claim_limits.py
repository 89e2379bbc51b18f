"""The two limits `bench/claim.py` prints beside the claim path, measured by a claimer
process each on the same schema: the raw claim (the bare `FOR UPDATE SKIP LOCKED`
statement that advances due tasks, no runs) and the claim path's floor (every write of
a claim made by one statement per batch, every value computed by PostgreSQL). Each
returns the occurrences it claimed and its own CPU seconds; with `in_flight` above 1,
it keeps that many statements under way at once, each on a connection of its own, as a
replica's claim pass does with a backlog."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from multiprocessing.synchronize import Barrier
from typing import Any

import psycopg
from psycopg import sql

# The raw claim: the one statement every claim is built on (lock a batch of due tasks,
# earliest first, skipping locked rows, and advance them), with no run, lease or Python
# rule. Its rate is this machine's limit for the claim path.
RAW_CLAIM = """
WITH due AS (
    SELECT id FROM {}.tasks WHERE enabled AND next_run_at <= %(now)s
    ORDER BY next_run_at, id LIMIT %(limit)s FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE {}.tasks AS t SET next_run_at = t.next_run_at + interval '1 hour'
FROM due WHERE t.id = due.id
"""


async def raw_claim_all(
    url: str, schema: str, now: datetime, batch: int, start: Barrier, in_flight: int = 1
) -> tuple[int, float]:
    query = sql.SQL(RAW_CLAIM).format(sql.Identifier(schema), sql.Identifier(schema))

    async def claim_until_none_due(conn: psycopg.AsyncConnection[Any]) -> int:
        claimed = 0
        while (cur := await conn.execute(query, {"now": now, "limit": batch})).rowcount:
            claimed += cur.rowcount
        return claimed

    return await on_connections(url, in_flight, start, claim_until_none_due)


async def on_connections(
    url: str,
    count: int,
    start: Barrier,
    claim_until_none_due: Callable[[psycopg.AsyncConnection[Any]], Awaitable[int]],
) -> tuple[int, float]:
    """Run `claim_until_none_due` on `count` connections at once, once every claimer is
    ready: the occurrences claimed, and this process's CPU seconds."""
    async with contextlib.AsyncExitStack() as stack:
        conns = [
            await stack.enter_async_context(
                await psycopg.AsyncConnection.connect(url, autocommit=True)
            )
            for _ in range(count)
        ]
        start.wait()
        cpu = time.process_time()
        claimed = await asyncio.gather(*(claim_until_none_due(conn) for conn in conns))
        return sum(claimed), time.process_time() - cpu


# The floor of the whole claim path: the writes `claim_due` makes for a batch (lock the
# due tasks, take each one's lease lock and count its leases, advance it, insert a run
# and its lease, return the runs), in one statement with every value computed by
# PostgreSQL: no Python per occurrence at all, and one round trip. The claim path can
# come near this, never past it; a goal above it is above this machine.
FLOOR_CLAIM = """
WITH due AS (
    SELECT id, next_fire_at FROM {schema}.tasks WHERE enabled AND next_run_at <= %(now)s
    ORDER BY next_run_at, id LIMIT %(limit)s FOR NO KEY UPDATE SKIP LOCKED
), locked AS MATERIALIZED (
    SELECT id, next_fire_at, pg_advisory_xact_lock(hashtextextended(id::text, 0)) AS lock
    FROM due ORDER BY id
), counted AS MATERIALIZED (
    SELECT k.id, k.next_fire_at, (
        SELECT count(*) FROM {schema}.run_leases AS l
        WHERE l.task_id = k.id AND l.expires_at > %(now)s
    ) AS leases
    FROM locked AS k
), advanced AS (
    UPDATE {schema}.tasks AS t SET
        next_fire_at = c.next_fire_at + interval '1 hour',
        next_run_at = c.next_fire_at + interval '1 hour',
        last_run_at = c.next_fire_at
    FROM counted AS c WHERE t.id = c.id
), recorded AS (
    INSERT INTO {schema}.runs (
        id, task_id, scheduled_for, coalesced, claimed_at, started_at, finished_at,
        lease_expires_at, status, error, manual, attempts, replica
    )
    SELECT gen_random_uuid(), c.id, c.next_fire_at, 1, %(now)s, %(now)s, NULL,
        %(now)s::timestamptz + interval '1 minute', 'running', NULL, false, 0, %(replica)s
    FROM counted AS c WHERE c.leases < 1
    RETURNING id, task_id, scheduled_for, lease_expires_at, replica
), leased AS (
    INSERT INTO {schema}.run_leases (run_id, task_id, expires_at, replica)
    SELECT id, task_id, lease_expires_at, replica FROM recorded
)
SELECT id, task_id, scheduled_for FROM recorded
"""


async def floor_claim_all(
    url: str,
    schema: str,
    now: datetime,
    batch: int,
    replica: str,
    start: Barrier,
    in_flight: int = 1,
) -> tuple[int, float]:
    query = sql.SQL(FLOOR_CLAIM).format(schema=sql.Identifier(schema))
    params = {"now": now, "limit": batch, "replica": replica}

    async def claim_until_none_due(conn: psycopg.AsyncConnection[Any]) -> int:
        claimed = 0
        while runs := await (await conn.execute(query, params, binary=True)).fetchall():
            claimed += len(runs)
        return claimed

    return await on_connections(url, in_flight, start, claim_until_none_due)
