"""Behaviour particular to PostgresTaskStore: notifications in the writing transaction,
optimistic concurrency between replicas, the claim query's plan, rows written by hand,
schema names that need quoting."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timezone
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg import sql

from adapters.postgres import PostgresTaskStore, PostgresWaker, create_pool, initialize
from adapters.postgres.queries import bind_queries
from adapters.postgres.store import channels
from application.ports import RunPageKey, TaskFilter, TaskPageKey
from domain.errors import RunNotRunning, VersionConflict
from domain.runs import RunOutcome, RunStatus
from tests.adapters.postgres.support import MINUTE, SECOND, T0, query
from tests.fixtures.postgres import PostgresBackend, drop_schema
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import make_task

pytestmark = pytest.mark.postgres


class Listener:
    """A LISTEN connection of the test's own, to see exactly what was notified."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn

    async def next(self, within: float = 5.0) -> tuple[str, str] | None:
        async for notify in self.conn.notifies(timeout=within, stop_after=1):
            return notify.channel, notify.payload
        return None


@pytest.fixture
async def listener(postgres_backend: PostgresBackend) -> AsyncIterator[Listener]:
    async with await psycopg.AsyncConnection.connect(postgres_backend.url, autocommit=True) as conn:
        for channel in channels(postgres_backend.schema):
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        yield Listener(conn)


async def test_task_writes_notify_in_their_transaction(
    postgres_store: PostgresTaskStore, listener: Listener
) -> None:
    tasks_channel = postgres_store.tasks_channel
    task = await postgres_store.create_task(make_task())
    assert await listener.next() == (tasks_channel, str(task.id))
    changed = task.model_copy(update={"description": "new"})
    await postgres_store.update_task(changed, 1, reschedule=False)
    assert await listener.next() == (tasks_channel, str(task.id))
    with pytest.raises(VersionConflict):
        await postgres_store.update_task(changed, 1, reschedule=False)
    await postgres_store.delete_task(task.id)
    # The rejected update was rolled back with its notification: next comes the delete.
    assert await listener.next() == (tasks_channel, str(task.id))
    assert await listener.next(within=0.3) is None


async def test_a_cancel_request_is_written_to_the_lease_and_notified(
    postgres_backend: PostgresBackend, postgres_store: PostgresTaskStore, listener: Listener
) -> None:
    await postgres_store.create_task(make_task())
    await listener.next()
    [claimed] = await postgres_store.claim_due(T0, 10, "r")
    run = claimed.run
    await postgres_store.request_cancel(run.id)
    assert await listener.next() == (postgres_store.cancel_channel, str(run.id))
    rows = await query(
        postgres_backend.url,
        "SELECT cancel_requested FROM {schema}.run_leases WHERE run_id = %s",
        postgres_backend.schema,
        run.id,
    )
    assert rows == [(True,)]
    await finish_one(
        postgres_store, run.id, RunOutcome(status=RunStatus.CANCELLED, finished_at=T0 + SECOND)
    )
    with pytest.raises(RunNotRunning):
        await postgres_store.request_cancel(run.id)
    assert await listener.next(within=0.3) is None


async def test_pausing_after_failures_notifies(
    postgres_store: PostgresTaskStore, listener: Listener
) -> None:
    task = await postgres_store.create_task(make_task(pause_after_failures=1))
    await listener.next()
    [claimed] = await postgres_store.claim_due(T0, 10, "r")
    await finish_one(
        postgres_store,
        claimed.run.id,
        RunOutcome(status=RunStatus.FAILED, error="x", finished_at=T0),
    )
    assert await listener.next() == (postgres_store.tasks_channel, str(task.id))
    paused = await postgres_store.get_task(task.id)
    assert (paused.enabled, paused.version, paused.updated_at) == (False, 2, T0)


async def test_concurrent_updates_of_one_version_let_exactly_one_win(
    postgres_backend: PostgresBackend,
) -> None:
    replicas = [await postgres_backend.new_store() for _ in range(3)]
    task = await replicas[0].create_task(make_task())
    edits = [
        replica.update_task(task.model_copy(update={"description": f"by {i}"}), 1, reschedule=False)
        for i, replica in enumerate(replicas)
    ]
    results = await asyncio.gather(*edits, return_exceptions=True)
    winners = [r for r in results if not isinstance(r, BaseException)]
    losers = [r for r in results if isinstance(r, VersionConflict)]
    assert len(winners) == 1 and len(losers) == 2
    assert all(conflict.actual == 2 for conflict in losers)
    assert await replicas[1].get_task(task.id) == winners[0]


async def test_keyset_pages_stay_exact_while_rows_are_added(
    postgres_store: PostgresTaskStore,
) -> None:
    created = [
        await postgres_store.create_task(make_task(now=T0 + (i // 7) * SECOND)) for i in range(40)
    ]
    seen: list[UUID] = []
    after = None
    while page := await postgres_store.list_tasks(TaskFilter(), after, 6):
        seen.extend(task.id for task in page)
        after = TaskPageKey(page[-1].created_at, page[-1].id)
        # A task created "earlier" mid-listing lands before the cursor, never twice.
        await postgres_store.create_task(make_task(now=T0 - MINUTE))
    expected = sorted(created, key=lambda t: (t.created_at, t.id))
    assert seen == [task.id for task in expected]


async def test_run_history_pages_by_keyset(postgres_store: PostgresTaskStore) -> None:
    task = await postgres_store.create_task(make_task(max_running_instances=100))
    runs = []
    for i in range(12):
        runs.append(
            (await postgres_store.start_manual_run(task.id, T0 + (i // 3) * SECOND, "r")).run
        )
    pages = []
    after = None
    while page := await postgres_store.list_runs(task.id, RunStatus.RUNNING, after, 5):
        pages.append(page)
        after = RunPageKey(page[-1].scheduled_for, page[-1].id)
    assert [len(p) for p in pages] == [5, 5, 2]
    expected = sorted(runs, key=lambda r: (r.scheduled_for, r.id), reverse=True)
    assert [r.id for p in pages for r in p] == [r.id for r in expected]


async def test_the_claim_query_reads_the_due_index_in_order(
    postgres_backend: PostgresBackend,
) -> None:
    claim_due = bind_queries(postgres_backend.schema)["claim_due"]
    async with await psycopg.AsyncConnection.connect(postgres_backend.url) as conn:
        # On a near-empty table any plan will do; forbid the others to see that this
        # one exists: an ordered index range scan, with no sort above it.
        await conn.execute("SET LOCAL enable_seqscan = off")
        await conn.execute("SET LOCAL enable_bitmapscan = off")
        cur = await conn.execute(b"EXPLAIN " + claim_due, {"now": T0, "limit": 100})
        plan = "\n".join(row[0] for row in await cur.fetchall())
    assert "tasks_due_idx" in plan
    assert "Sort" not in plan


async def test_a_row_that_no_longer_validates_is_left_alone(
    postgres_backend: PostgresBackend, postgres_store: PostgresTaskStore
) -> None:
    broken = await postgres_store.create_task(make_task())
    good = await postgres_store.create_task(make_task())
    await query(
        postgres_backend.url,
        "UPDATE {schema}.tasks SET trigger = %s::jsonb WHERE id = %s",
        postgres_backend.schema,
        json.dumps({"kind": "cron", "expression": "not a cron"}),
        broken.id,
    )
    claimed = await postgres_store.claim_due(T0, 10, "r")
    assert [c.task.id for c in claimed] == [good.id]


async def test_a_row_written_before_a_rule_was_added_is_still_read(
    postgres_backend: PostgresBackend, postgres_store: PostgresTaskStore
) -> None:
    # A calendar step over 100 years is refused when written (docs/triggers.md), not
    # when an older row that has one is read back.
    task = await postgres_store.create_task(make_task())
    older = {"kind": "calendar", "years": 9000, "start_date": "2026-01-01", "timezone": "UTC"}
    await query(
        postgres_backend.url,
        "UPDATE {schema}.tasks SET trigger = %s::jsonb WHERE id = %s",
        postgres_backend.schema,
        json.dumps(older),
        task.id,
    )

    read = await postgres_store.get_task(task.id)

    assert read.trigger.kind == "calendar" and read.trigger.years == 9000
    listed = await postgres_store.list_tasks(TaskFilter(), None, 10)
    assert [t.id for t in listed] == [task.id]


async def test_a_stale_next_run_at_is_mended_not_claimed(
    postgres_backend: PostgresBackend, postgres_store: PostgresTaskStore
) -> None:
    task = await postgres_store.create_task(make_task())
    await query(
        postgres_backend.url,
        "UPDATE {schema}.tasks SET next_run_at = %s WHERE id = %s",
        postgres_backend.schema,
        T0 - MINUTE,
        task.id,
    )
    assert await postgres_store.claim_due(T0 - SECOND, 10, "r") == []
    assert (await postgres_store.get_task(task.id)).next_run_at == T0
    assert len(await postgres_store.claim_due(T0, 10, "r")) == 1


async def test_deleting_a_task_drops_its_leases_and_a_late_finish_is_tolerated(
    postgres_backend: PostgresBackend, postgres_store: PostgresTaskStore
) -> None:
    task = await postgres_store.create_task(make_task(pause_after_failures=1))
    [claimed] = await postgres_store.claim_due(T0, 10, "r")
    await postgres_store.delete_task(task.id)
    leases = await query(
        postgres_backend.url, "SELECT count(*) FROM {schema}.run_leases", postgres_backend.schema
    )
    assert leases == [(0,)]
    finished = await finish_one(
        postgres_store, claimed.run.id, RunOutcome(status=RunStatus.FAILED, finished_at=T0 + SECOND)
    )
    assert finished.status is RunStatus.FAILED


async def test_a_schema_name_that_needs_quoting(database_url: str) -> None:
    schema = 'Odd "schema"-1'
    await initialize(database_url, schema)
    pool = create_pool(database_url)
    await pool.open(wait=True)
    waker = PostgresWaker(database_url, schema)
    try:
        await waker.start()
        store = PostgresTaskStore(pool, schema)
        task = await store.create_task(make_task())
        await asyncio.wait_for(waker.wait(), 5)
        [claimed] = await store.claim_due(T0, 10, "r")
        assert claimed.task.id == task.id
        assert await store.list_runs(task.id, None, None, 10) == [claimed.run]
    finally:
        await waker.close()
        await pool.close()
        await drop_schema(database_url, schema)


async def test_instants_come_back_in_utc_whatever_the_server_zone(
    postgres_backend: PostgresBackend,
) -> None:
    """The pool sets each session's zone to UTC: `timezone.utc` datetimes, the same
    instants as the server's zone would give."""
    store = await postgres_backend.new_store()
    async with await psycopg.AsyncConnection.connect(postgres_backend.url) as conn:
        await conn.execute(
            sql.SQL("ALTER ROLE CURRENT_USER IN DATABASE {} SET TimeZone = 'Asia/Kolkata'").format(
                sql.Identifier(conn.info.dbname)
            )
        )
        await conn.commit()
    try:
        pool = create_pool(postgres_backend.url, min_size=1, max_size=1)
        await pool.open(wait=True)
        try:
            zoned = PostgresTaskStore(pool, postgres_backend.schema)
            task = await zoned.create_task(make_task())
            [claimed] = await zoned.claim_due(T0, 10, "r")
            for instant in (task.created_at, claimed.task.next_run_at, claimed.run.claimed_at):
                assert instant is not None and instant.tzinfo is timezone.utc
            assert claimed.run.claimed_at == T0
            assert await store.get_run(claimed.run.id) == claimed.run
        finally:
            await pool.close()
    finally:
        async with await psycopg.AsyncConnection.connect(postgres_backend.url) as conn:
            await conn.execute(
                sql.SQL("ALTER ROLE CURRENT_USER IN DATABASE {} RESET TimeZone").format(
                    sql.Identifier(conn.info.dbname)
                )
            )
            await conn.commit()
