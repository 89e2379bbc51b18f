"""The answer limit (adapters/postgres/silence.py, docs/adr/0018): a connection that has
waited on the database that long in a row is shut, and what waited on it fails as on
a lost connection; time the caller spends on its own work while it holds the
connection does not count."""

from __future__ import annotations

import asyncio
import logging
import uuid

import psycopg
import pytest

from adapters.postgres import PostgresTaskStore, create_pool
from adapters.postgres.pool import live_connection
from adapters.postgres.silence import was_cut
from bench.soak_proxy import FaultyProxy
from tests.fixtures.postgres import PostgresBackend

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


async def test_a_look_for_runs_a_lost_commit_wrote_stops_at_the_first_silent_answer(
    postgres_proxy: tuple[FaultyProxy, str],
    postgres_backend: PostgresBackend,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # After a COMMIT went unanswered the store looks a few times for what it wrote
    # (a manual run answered by it, a claim's runs). A database that answers nothing
    # would hold each look for the whole limit: the first such look ends them all.
    proxy, url = postgres_proxy
    pool = create_pool(url, min_size=2, max_size=2, answer_limit=LIMIT)
    await pool.open(wait=True)
    store = PostgresTaskStore(pool, postgres_backend.schema)
    proxy.hold()
    try:
        with caplog.at_level(logging.WARNING, logger="adapters.postgres.silence"):
            found = await store._landed([uuid.uuid4()])
    finally:
        proxy.release()
        await pool.close()

    assert found is None  # the store cannot say
    cuts = [r for r in caplog.records if r.name == "adapters.postgres.silence"]
    assert len(cuts) == 1
