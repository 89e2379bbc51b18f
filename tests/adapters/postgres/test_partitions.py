"""Runs partitioned by week (docs/storage.md, "Partitions"): the initializer makes them,
an older database is upgraded without losing a run, rows a new week's partition covers
leave the default partition for it, retention drops only weeks wholly past the cutoff
whose runs have all finished, and keyset pages cross partitions without losing or
repeating a run."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

import adapters.postgres.retention as retention
from adapters.postgres import PostgresTaskStore, initialize
from adapters.postgres.partitions import Partition, existing_partitions, partition_start
from application.store_values import RunFilter, RunPageKey
from domain.errors import RunNotFound
from domain.runs import Run, RunStatus
from tests.adapters.postgres.support import query
from tests.fixtures.postgres import drop_schema

pytestmark = pytest.mark.postgres

ROOT_FILE = Path(__file__).resolve().parents[3] / "schemata.toml"
WEEK = timedelta(days=7)
MONDAY = datetime(2026, 3, 2, tzinfo=UTC)  # partition_start(MONDAY, 7) == MONDAY


async def partitions(url: str, schema: str) -> list[Partition]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        return await existing_partitions(conn, schema, "runs")


async def insert_runs(url: str, schema: str, times: list[datetime], status: str) -> list[Any]:
    """One run of one made-up task at each of `times`; their ids."""
    ids = [uuid.uuid4() for _ in times]
    await query(
        url,
        "INSERT INTO {schema}.runs (id, task_id, scheduled_for, claimed_at, finished_at,"
        " status, replica) SELECT i, %s, at, at, CASE WHEN %s IN ('queued', 'running')"
        " THEN NULL ELSE at END, %s, 'test:1' FROM unnest(%s::uuid[], %s::timestamptz[])"
        " AS r(i, at)",
        schema,
        uuid.UUID(int=1),
        status,
        status,
        ids,
        times,
    )
    return ids


async def found_runs(store: PostgresTaskStore, ids: list[Any]) -> list[Run]:
    """The runs of `ids` that the store finds, each read by its id alone."""
    found = []
    for run_id in ids:
        with contextlib.suppress(RunNotFound):
            found.append(await store.get_run(run_id))
    return found


async def where_runs_are(url: str, schema: str) -> dict[str, int]:
    rows = await query(
        url, "SELECT tableoid::regclass::text, count(*) FROM {schema}.runs GROUP BY 1", schema
    )
    return {name.rsplit(".", 1)[-1].strip('"'): count for name, count in rows}


def test_a_partition_starts_on_a_monday_at_midnight_utc() -> None:
    assert partition_start(datetime(2026, 3, 4, 17, 5, tzinfo=UTC), 7) == MONDAY
    assert partition_start(MONDAY, 7) == MONDAY
    assert partition_start(MONDAY - timedelta(microseconds=1), 7) == MONDAY - WEEK
    assert partition_start(datetime(2026, 3, 4, 17, 5, tzinfo=UTC), 1) == datetime(
        2026, 3, 4, tzinfo=UTC
    )


async def test_a_new_database_has_this_week_the_next_and_a_default(
    database_url: str, postgres_schema: str
) -> None:
    found = await partitions(database_url, postgres_schema)
    this_week = partition_start(datetime.now(UTC), 7)
    assert [(p.name, p.lower, p.upper, p.default) for p in found] == [
        (f"runs_p{this_week:%Y%m%d}", this_week, this_week + WEEK, False),
        (f"runs_p{this_week + WEEK:%Y%m%d}", this_week + WEEK, this_week + 2 * WEEK, False),
        ("runs_default", None, None, True),
    ]
    kinds = await query(
        database_url,
        "SELECT c.relkind FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = 'runs'",
        postgres_schema,
        postgres_schema,
    )
    assert kinds == [("p",)]


async def test_a_week_whose_runs_are_in_the_default_partition_stays_there(
    database_url: str, postgres_store: PostgresTaskStore
) -> None:
    schema = postgres_store.schema
    # Runs of a March week (long before this week's partition) land in the default.
    times = [MONDAY + timedelta(hours=h) for h in range(0, 7 * 24, 12)]
    ids = await insert_runs(database_url, schema, times, "succeeded")
    assert await where_runs_are(database_url, schema) == {"runs_default": len(times)}
    # The retention sweep on a clock in that week makes the next week's partition only:
    # that week's runs are not moved (reads meanwhile would see them in neither place).
    assert await postgres_store.drop_runs_before(MONDAY - 52 * WEEK, MONDAY + WEEK / 2) == 0
    names = [p.name for p in await partitions(database_url, schema)]
    assert f"runs_p{MONDAY + WEEK:%Y%m%d}" in names and f"runs_p{MONDAY:%Y%m%d}" not in names
    assert await where_runs_are(database_url, schema) == {"runs_default": len(times)}
    assert {run.id for run in await found_runs(postgres_store, ids)} == set(ids)
    # A run for that week written now joins them; one of the next week has its partition.
    [late] = await insert_runs(database_url, schema, [MONDAY + timedelta(days=6)], "failed")
    [next_week] = await insert_runs(database_url, schema, [MONDAY + WEEK], "failed")
    assert (await postgres_store.get_run(late)).status is RunStatus.FAILED
    assert await where_runs_are(database_url, schema) == {
        "runs_default": len(times) + 1,
        f"runs_p{MONDAY + WEEK:%Y%m%d}": 1,
    }
    assert (await postgres_store.get_run(next_week)).status is RunStatus.FAILED


async def test_retention_drops_only_finished_weeks_wholly_past_the_cutoff(
    database_url: str, postgres_store: PostgresTaskStore
) -> None:
    schema = postgres_store.schema
    now = MONDAY + 5 * WEEK + timedelta(days=2)
    for week in range(6):  # partitions for the six weeks from MONDAY
        await postgres_store.drop_runs_before(MONDAY - WEEK, MONDAY + week * WEEK)
    daily = [MONDAY + timedelta(days=d, hours=3) for d in range(42)]
    await insert_runs(database_url, schema, daily, "succeeded")
    # Week 1 still has a queued run (a backfill waiting for its slot).
    queued_at = MONDAY + WEEK + timedelta(days=1)
    [queued] = await insert_runs(database_url, schema, [queued_at], "queued")
    cutoff = MONDAY + 2 * WEEK + timedelta(days=3)  # in week 2
    dropped = await postgres_store.drop_runs_before(cutoff, now)
    assert dropped == 7  # week 0; week 1 waits for its queued run, week 2 is not past
    names = {p.name for p in await partitions(database_url, schema)}
    assert f"runs_p{MONDAY:%Y%m%d}" not in names
    assert {f"runs_p{MONDAY + WEEK:%Y%m%d}", f"runs_p{MONDAY + 2 * WEEK:%Y%m%d}"} <= names
    assert (await postgres_store.get_run(queued)).status is RunStatus.QUEUED
    # The row sweep takes what is left before the cutoff: weeks 1 and the start of 2.
    assert await postgres_store.delete_runs_before(cutoff, 1000) == 7 + 3
    left = await query(
        database_url, "SELECT min(scheduled_for), count(*) FROM {schema}.runs", schema
    )
    assert left == [(MONDAY + WEEK + timedelta(days=1), 42 - 17 + 1)]


async def test_a_busy_runs_table_puts_the_drop_off_until_the_next_sweep(
    database_url: str, postgres_store: PostgresTaskStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = postgres_store.schema
    await postgres_store.drop_runs_before(MONDAY - WEEK, MONDAY)
    [run_id] = await insert_runs(database_url, schema, [MONDAY + timedelta(hours=1)], "failed")
    monkeypatch.setattr(retention, "LOCK_TIMEOUT", "200ms")
    async with await psycopg.AsyncConnection.connect(database_url) as reader:
        # A long read of runs holds its lock until it commits.
        await reader.execute(
            psycopg.sql.SQL("SELECT count(*) FROM {}.runs").format(psycopg.sql.Identifier(schema))
        )
        assert await postgres_store.drop_runs_before(MONDAY + 3 * WEEK, MONDAY + 3 * WEEK) == 0
        await reader.rollback()
    assert (await postgres_store.get_run(run_id)).status is RunStatus.FAILED
    assert await postgres_store.drop_runs_before(MONDAY + 3 * WEEK, MONDAY + 3 * WEEK) == 1
    assert await found_runs(postgres_store, [run_id]) == []


async def test_keyset_pages_cross_partitions_with_every_run_once(
    database_url: str, postgres_store: PostgresTaskStore
) -> None:
    schema = postgres_store.schema
    for weeks in range(3):
        await postgres_store.drop_runs_before(MONDAY - WEEK, MONDAY + weeks * WEEK)
    # Every 9 hours over four weeks: three partitions and the default after them.
    times = [MONDAY + timedelta(hours=9 * k) for k in range(4 * 7 * 24 // 9)]
    ids = await insert_runs(database_url, schema, times, "succeeded")
    assert len(await where_runs_are(database_url, schema)) == 4
    seen: list[Any] = []
    after: RunPageKey | None = None
    while True:
        page = await postgres_store.list_all_runs(RunFilter(), after, 7)
        if not page:
            break
        seen += page
        after = RunPageKey(page[-1].scheduled_for, page[-1].id)
    assert sorted(r.id for r in seen) == sorted(ids)
    assert [r.scheduled_for for r in seen] == sorted(times, reverse=True)
    # A week bounded by since/until reads its own partition.
    week = await postgres_store.list_all_runs(
        RunFilter(since=MONDAY + WEEK, until=MONDAY + 2 * WEEK - timedelta(microseconds=1)),
        None,
        1000,
    )
    assert {r.scheduled_for for r in week} == {
        t for t in times if MONDAY + WEEK <= t < MONDAY + 2 * WEEK
    }


async def test_an_unpartitioned_database_is_upgraded_without_losing_a_run(
    database_url: str, tmp_path: Path
) -> None:
    schema = f"u_{uuid.uuid4().hex[:12]}"
    # The shape before partitions: runs keyed by id alone, no `partitions`.
    text = ROOT_FILE.read_text()
    start = text.index("[tables.partitions]")
    end = text.index('columns = ["id", "scheduled_for"]\n')
    old = text[:start] + '[tables.primary_key]\ncolumns = ["id"]\n' + text[end + 33 :]
    assert "[tables.partitions]" not in old
    path = tmp_path / "schemata.toml"
    path.write_text(old)
    try:
        await initialize(database_url, schema, path=path)
        assert await partitions(database_url, schema) == []
        times = [MONDAY - timedelta(days=d) for d in range(0, 400, 3)]
        ids = await insert_runs(database_url, schema, times, "succeeded")
        [running] = await insert_runs(database_url, schema, [MONDAY], "running")
        done = await initialize(database_url, schema)
        assert any("ATTACH PARTITION" in statement for statement in done)
        found = await partitions(database_url, schema)
        legacy = found[0]
        assert legacy.name.startswith("runs_before_") and legacy.lower is None
        assert legacy.upper is not None and legacy.upper > datetime.now(UTC)
        assert found[-1].default
        # Every run is where it was, in the first partition, and reads as before.
        assert await where_runs_are(database_url, schema) == {legacy.name: len(ids) + 1}
        pool_store = await _store(database_url, schema)
        try:
            assert {r.id for r in await found_runs(pool_store, [*ids, running])} == {*ids, running}
        finally:
            await pool_store._pool.close()
        # The old indexes serve the new table (attached, not built twice).
        indexes = await query(
            database_url,
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = 'runs'",
            schema,
            schema,
        )
        assert {"runs_pkey", "runs_history_idx", "runs_listing_idx"} <= {n for (n,) in indexes}
        on_legacy = await query(
            database_url,
            "SELECT count(*) FROM pg_indexes WHERE schemaname = %s AND tablename = %s",
            schema,
            schema,
            legacy.name,
        )
        assert on_legacy == [(len(indexes),)]  # each one attached, none built twice
        assert await initialize(database_url, schema) == []
    finally:
        await drop_schema(database_url, schema)


async def test_initializers_and_sweeps_side_by_side_make_each_partition_once(
    database_url: str, postgres_store: PostgresTaskStore
) -> None:
    schema = postgres_store.schema
    later = MONDAY + 10 * WEEK
    # A sweep that finds another at work leaves the partitions to it; none fails.
    results = await asyncio.gather(
        *(postgres_store.drop_runs_before(MONDAY, later) for _ in range(4)),
        initialize(database_url, schema),
    )
    assert results[:4] == [0, 0, 0, 0]
    await postgres_store.drop_runs_before(MONDAY, later)
    names = [p.name for p in await partitions(database_url, schema)]
    assert len(names) == len(set(names))
    assert {f"runs_p{later:%Y%m%d}", f"runs_p{later + WEEK:%Y%m%d}"} <= set(names)


async def _store(url: str, schema: str) -> PostgresTaskStore:
    from adapters.postgres import create_pool

    pool = create_pool(url, min_size=1, max_size=1)
    await pool.open(wait=True)
    return PostgresTaskStore(pool, schema)
