"""The answer limit (adapters/postgres/silence.py, docs/adr/0018): a connection that has
waited on the database that long in a row is shut, and what waited on it fails as on
a lost connection; time the caller spends on its own work while it holds the
connection does not count."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from adapters.postgres import create_pool
from adapters.postgres.pool import live_connection
from adapters.postgres.silence import was_cut

pytestmark = [pytest.mark.postgres]

LIMIT = 1.5  # seconds


async def test_a_wait_on_the_database_past_the_limit_is_cut_but_client_work_is_not(
    database_url: str,
) -> None:
    pool = create_pool(database_url, min_size=1, max_size=2, answer_limit=LIMIT)
    await pool.open(wait=True)
    try:
        async with live_connection(pool) as conn:
            await asyncio.sleep(LIMIT * 2)  # the caller's own work: nothing is owed
            assert (await (await conn.execute("SELECT 1")).fetchone()) == (1,)
            assert not was_cut(conn)

        with pytest.raises(psycopg.OperationalError):
            async with live_connection(pool) as conn:
                await conn.execute("SELECT pg_sleep(%s)", (LIMIT * 4,))  # owed all along
        assert was_cut(conn) and conn.closed

        async with live_connection(pool) as fresh:  # the pool goes on with another
            assert (await (await fresh.execute("SELECT 2")).fetchone()) == (2,)
    finally:
        await pool.close()
