"""`GET /runs` with many run rows: how long a filtered page takes.

Fills a schema of its own with `--tasks` tasks (tags `team-0` … `team-19`, five of
them also `rare`) and `--runs` runs spread over 30 days (mostly succeeded, some failed,
missed and skipped, a few running; one run in a thousand made by one backfill), analyzes
the tables, then sends 200 page requests through the real API (the Litestar app in this
process, on that schema, without its engine), cycling through the filters:
none, `status=failed`, `status=running`, `task=`, `tag=team-N`, `tag=rare`, a
`since`/`until` day, `backfill=`, each as a first page or a later page (its cursor from
a request made beforehand). It prints p50 and p99 per filter and over all 200. The
schema is dropped at the end.

    python bench/runs.py [--tasks N] [--runs N] [--url URL] [--retention]

The runs land in the week partitions of their 30 days (made first, as the sweep makes
them). With --retention it then times the retention sweep with the cutoff 14 days in:
the two whole weeks before it dropped as partitions, against deleting as many rows a
batch at a time, and the row deletes of what is left before the cutoff.
Issue 14's row: `--runs 10000000 --retention`.

The URL comes from --url, else SCHEDULER_DATABASE_URL, else the local server's `test`
database. The goal: p99 under 50 ms with 1,000,000 runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from litestar.testing import AsyncTestClient
from psycopg import sql
from psycopg.types.json import Jsonb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.postgres import PostgresTaskStore, create_pool, initialize
from adapters.postgres.partitions import ensure_partitions
from adapters.postgres.retention import runs_table
from domain.tasks import HttpTarget
from domain.triggers import IntervalTrigger
from entrypoints.container import build_container
from entrypoints.http.app import create_app
from entrypoints.settings import Settings

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SPAN_SECONDS = 30 * 86_400
REQUESTS = 200
BACKFILL = uuid.UUID("00000000-0000-4000-8000-00000000bf01")


async def fill(url: str, schema: str, tasks: int, runs: int) -> list[uuid.UUID]:
    trigger = IntervalTrigger(every=3600, anchor=T0).model_dump(mode="json")
    target = HttpTarget(url="http://127.0.0.1:9/hook").model_dump(mode="json")
    name = sql.Identifier(schema)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            sql.SQL(
                "INSERT INTO {}.tasks (id, name, trigger, target, tags, created_at, updated_at)"
                " SELECT gen_random_uuid(), 'bench-' || i, %s, %s,"
                " CASE WHEN i <= 5 THEN ARRAY['team-' || i %% 20, 'rare']"
                " ELSE ARRAY['team-' || i %% 20] END, %s, %s"
                " FROM generate_series(1, %s) AS i"
            ).format(name),
            [Jsonb(trigger), Jsonb(target), T0, T0, tasks],
        )
        cur = await conn.execute(sql.SQL("SELECT id FROM {}.tasks ORDER BY name").format(name))
        ids = [row[0] for row in await cur.fetchall()]
        await conn.execute(
            sql.SQL(
                "INSERT INTO {schema}.runs (id, task_id, scheduled_for, claimed_at, started_at,"
                " finished_at, status, attempts, http_status, replica, backfill_id)"
                " SELECT gen_random_uuid(), t.ids[1 + i %% %(tasks)s], at, at, at,"
                " at + interval '1 second',"
                " CASE WHEN i %% 1000 = 7 THEN 'running' WHEN i %% 100 = 1 THEN 'missed'"
                " WHEN i %% 100 = 2 THEN 'skipped' WHEN i %% 12 = 3 THEN 'failed'"
                " ELSE 'succeeded' END, 1, 200, 'bench:1',"
                " CASE WHEN i %% 1000 = 500 THEN %(backfill)s::uuid END"
                " FROM (SELECT array_agg(id ORDER BY name) AS ids FROM {schema}.tasks) AS t,"
                " generate_series(1, %(runs)s) AS i,"
                " LATERAL (SELECT %(t0)s::timestamptz"
                "   + make_interval(secs => (i::bigint * 7919) %% %(span)s)) AS s (at)"
            ).format(schema=name),
            {"tasks": tasks, "runs": runs, "backfill": BACKFILL, "t0": T0, "span": SPAN_SECONDS},
        )
        await conn.execute(sql.SQL("VACUUM ANALYZE {}.runs").format(name))
        await conn.execute(sql.SQL("VACUUM ANALYZE {}.tasks").format(name))
    return ids


def filters(task_ids: list[uuid.UUID]) -> dict[str, dict[str, str]]:
    day = T0 + timedelta(days=12)
    return {
        "none": {},
        "status=failed": {"status": "failed"},
        "status=running": {"status": "running"},
        "task": {"task": str(task_ids[len(task_ids) // 2])},
        "tag=team-N": {"tag": "team-3"},
        "tag=rare": {"tag": "rare"},
        "since/until": {"since": day.isoformat(), "until": (day + timedelta(days=1)).isoformat()},
        "backfill": {"backfill": str(BACKFILL)},
    }


async def measure(url: str, schema: str, task_ids: list[uuid.UUID]) -> dict[str, list[float]]:
    settings = Settings(
        database_url=url, db_schema=schema, api_tokens="", host="127.0.0.1", pool_size=4
    )
    app = create_app(build_container(settings), run_engine=False)
    timings: dict[str, list[float]] = {}
    async with AsyncTestClient(app=app) as client:
        # A later page of each filter: the cursor of its third page, fetched beforehand.
        later: dict[str, dict[str, Any]] = {}
        for label, params in filters(task_ids).items():
            query: dict[str, Any] = params
            for _ in range(2):
                page = (await client.get("/runs", params=query)).json()
                if page["next_cursor"] is None:
                    break
                query = {"cursor": page["next_cursor"]}
            later[label] = query
        kinds = [(label, params) for label, params in filters(task_ids).items()]
        for i in range(REQUESTS):
            label, params = kinds[i % len(kinds)]
            if (i // len(kinds)) % 2:
                params = later[label]
            start = time.perf_counter()
            response = await client.get("/runs", params=params)
            elapsed = time.perf_counter() - start
            assert response.status_code == 200, response.text
            timings.setdefault(label, []).append(elapsed * 1000)
    return timings


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98] if len(values) > 1 else 0


async def make_weeks(url: str, schema: str) -> None:
    """The week partitions of the runs' 30 days (the sweep makes them on a clock then)."""
    table = runs_table()
    async with await psycopg.AsyncConnection.connect(url) as conn, conn.transaction():
        for week in range(0, SPAN_SECONDS // 86_400 + 7, 7):
            await ensure_partitions(conn, schema, table, T0 + timedelta(days=week))


async def measure_retention(url: str, schema: str) -> None:
    """The retention sweep once the oldest weeks are past the cutoff: whole partitions
    dropped, against deleting the same runs a batch of 1,000 at a time (timed on one
    batch, then counted at that rate)."""
    pool = create_pool(url, min_size=1, max_size=1)
    await pool.open(wait=True)
    try:
        store = PostgresTaskStore(pool, schema)
        cutoff = T0 + timedelta(days=14)
        # The fill leaves a run in a thousand `running` in every week; weeks old, those
        # would long have been failed by the lost-run sweep, and a week with a run still
        # running is not dropped. End them as the sweep would.
        async with pool.connection() as conn:
            await conn.execute(
                sql.SQL(
                    "UPDATE {}.runs SET status = 'failed', error = 'replica lost'"
                    " WHERE status = 'running' AND scheduled_for < %s"
                ).format(sql.Identifier(schema)),
                [cutoff],
            )
        start = time.perf_counter()
        await store.delete_runs_before(cutoff, 1000)
        per_batch = time.perf_counter() - start
        now = T0 + timedelta(days=30)
        start = time.perf_counter()
        dropped = await store.drop_runs_before(cutoff, now)
        elapsed = time.perf_counter() - start
        print(
            f"retention: {dropped:,} runs in whole partitions dropped in {elapsed:.2f} s;"
            f" row deletes take {per_batch * 1000:.0f} ms per 1,000"
            f" ({dropped / 1000 * per_batch:.0f} s for as many)"
        )
        start = time.perf_counter()
        left = await store.delete_runs_before(cutoff, 100_000)
        print(
            f"retention: then row deletes of what is left before the cutoff in its week:"
            f" {left:,} runs (one batch of at most 100,000) in"
            f" {time.perf_counter() - start:.2f} s"
        )
    finally:
        await pool.close()


async def run(url: str, tasks: int, runs: int, retention: bool) -> None:
    schema = f"bench_runs_{uuid.uuid4().hex[:8]}"
    await initialize(url, schema)
    try:
        await make_weeks(url, schema)
        start = time.perf_counter()
        task_ids = await fill(url, schema, tasks, runs)
        print(f"filled {tasks} tasks and {runs} runs in {time.perf_counter() - start:.1f} s")
        print(f"load average at start: {os.getloadavg()[0]:.2f}")
        timings = await measure(url, schema, task_ids)
        for label, values in timings.items():
            print(
                f"{label:16} n={len(values):3}  p50 {statistics.median(values):6.1f} ms"
                f"  p99 {p99(values):6.1f} ms"
            )
        every = [value for values in timings.values() for value in values]
        print(
            f"{'all':16} n={len(every):3}  p50 {statistics.median(every):6.1f} ms"
            f"  p99 {p99(every):6.1f} ms"
        )
        print(f"load average at end: {os.getloadavg()[0]:.2f}")
        if retention:
            await measure_retention(url, schema)
    finally:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--url", default=os.environ.get("SCHEDULER_DATABASE_URL", DEFAULT_URL))
    parser.add_argument(
        "--retention", action="store_true", help="then time the retention sweep (drops rows)"
    )
    args = parser.parse_args()
    asyncio.run(run(args.url, args.tasks, args.runs, args.retention))


if __name__ == "__main__":
    main()
