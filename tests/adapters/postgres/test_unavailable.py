"""Lost connections surface as StoreUnavailable and leave nothing half-written."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from adapters.postgres import PostgresTaskStore, create_pool
from adapters.postgres.advisory import lease_lock_key
from domain.errors import StoreUnavailable
from domain.runs import RunStatus
from tests.adapters.postgres.support import T0, kill_idle_connections, query
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually

pytestmark = pytest.mark.postgres


async def test_a_connection_killed_mid_claim_writes_nothing(
    postgres_backend: PostgresBackend, postgres_store: PostgresTaskStore
) -> None:
    url, schema = postgres_backend.url, postgres_backend.schema
    task = await postgres_store.create_task(make_task())
    other = await postgres_store.create_task(make_task())
    async with await psycopg.AsyncConnection.connect(url) as holder:
        # Hold one task's lease lock: the claim locks both rows, then waits on it.
        await holder.execute("SELECT pg_advisory_xact_lock(%s)", [lease_lock_key(schema, task.id)])
        claim = asyncio.create_task(postgres_store.claim_due(T0, 10, "r"))

        async def claimer_waits() -> bool:
            rows = await query(
                url,
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND wait_event = 'advisory' AND pid <> %s",
                schema,
                holder.info.backend_pid,
            )
            if rows:
                await query(url, "SELECT pg_terminate_backend(%s)", schema, rows[0][0])
            return bool(rows)

        await eventually(claimer_waits)
        with pytest.raises(StoreUnavailable) as error:
            await claim
        assert isinstance(error.value.__cause__, psycopg.OperationalError)
        await holder.rollback()
    for table in ("runs", "run_leases"):
        assert await query(url, f"SELECT count(*) FROM {{schema}}.{table}", schema) == [(0,)]
    for unchanged in (task, other):
        assert await postgres_store.get_task(unchanged.id) == unchanged
    # The pool replaced the dead connection; the retry claims both.
    claimed = await postgres_store.claim_due(T0, 10, "r")
    assert {c.task.id for c in claimed} == {task.id, other.id}
    assert {c.run.status for c in claimed} == {RunStatus.RUNNING}


async def test_a_read_on_a_connection_killed_while_idle_is_retried(
    postgres_backend: PostgresBackend, postgres_store: PostgresTaskStore
) -> None:
    task = await postgres_store.create_task(make_task())
    assert await kill_idle_connections(postgres_backend.url, postgres_backend.schema) > 0
    for _ in range(4):  # every pooled connection died; each read still answers
        assert await postgres_store.get_task(task.id) == task


async def test_a_write_after_every_idle_connection_was_killed_succeeds(
    postgres_backend: PostgresBackend,
) -> None:
    pool = create_pool(postgres_backend.url, min_size=3, max_size=3)
    await pool.open(wait=True)
    try:
        store = PostgresTaskStore(pool, postgres_backend.schema)
        await store.create_task(make_task())
        assert await kill_idle_connections(postgres_backend.url, postgres_backend.schema) >= 3

        # The claim (a write) is not failed by the dead connections, nor retried.
        assert len(await store.claim_due(T0, 10, "r")) == 1
        assert await query(
            postgres_backend.url, "SELECT count(*) FROM {schema}.runs", postgres_backend.schema
        ) == [(1,)]
    finally:
        await pool.close()


async def test_an_unreachable_server_is_store_unavailable() -> None:
    pool = create_pool("postgresql://postgres@127.0.0.1:1/test", timeout=0.5)
    await pool.open(wait=False)
    try:
        store = PostgresTaskStore(pool)
        with pytest.raises(StoreUnavailable):
            await store.ping()
        with pytest.raises(StoreUnavailable):
            await store.claim_due(T0, 10, "r")
    finally:
        await pool.close()
