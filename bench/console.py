"""Server time of the console's pages with 10,000 tasks (issue 12: first page < 150 ms).

Fills a fresh PostgreSQL schema with `--tasks` tasks (each with `--runs` finished runs,
one in six failed) by SQL, starts a real `imbi-scheduler serve --no-engine` on it, and
requests each page `--requests` times after a warm-up. The figure is the server's own
time to the first byte of the answer (the console's `Server-Timing: app;dur=` header);
the wall time on loopback is printed beside it. One figure per line, `name value`.

    python bench/console.py [--tasks 10000] [--runs 30] [--requests 20]

Each page reads one page of data: 50 tasks and their last 30 runs, or one task, its
next fire times and 25 runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from adapters.postgres import initialize
from domain.tasks import HttpTarget
from domain.triggers import CronTrigger
from tests.entrypoints.live import LiveServer

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
WARM_UP = 5
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def figure(name: str, value: float | int) -> None:
    text = f"{value:.1f}" if isinstance(value, float) else str(value)
    print(f"{name} {text}", flush=True)


async def fill(url: str, schema: str, tasks: int, runs: int) -> None:
    await initialize(url, schema)
    trigger = CronTrigger(expression="30 2 * * *", timezone="America/New_York")
    target = HttpTarget(url="http://127.0.0.1:9/hook").model_dump(mode="json")
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        name = sql.Identifier(schema)
        await conn.execute(
            sql.SQL(
                "INSERT INTO {}.tasks (id, name, trigger, target, tags, misfire_grace_seconds,"
                " created_at, updated_at, next_fire_at, next_run_at)"
                " SELECT gen_random_uuid(), 'bench-' || lpad(i::text, 5, '0'), %s, %s,"
                " CASE WHEN i %% 2 = 0 THEN ARRAY['even'] ELSE ARRAY['odd'] END,"
                " 60, %s + i * interval '1 millisecond', %s, %s, %s"
                " FROM generate_series(1, %s) AS i"
            ).format(name),
            [
                Jsonb(trigger.model_dump(mode="json")),
                Jsonb(target),
                T0,
                T0,
                T0 + timedelta(days=400),
                T0 + timedelta(days=400),
                tasks,
            ],
        )
        await conn.execute(
            sql.SQL(
                "INSERT INTO {0}.runs (id, task_id, scheduled_for, claimed_at, started_at,"
                " finished_at, status, attempts, http_status, response_excerpt, error, replica)"
                " SELECT gen_random_uuid(), t.id, %s - k * interval '1 day', %s, %s, %s,"
                " CASE WHEN k %% 6 = 0 THEN 'failed' ELSE 'succeeded' END, 1,"
                " CASE WHEN k %% 6 = 0 THEN 500 ELSE 200 END, 'ok',"
                " CASE WHEN k %% 6 = 0 THEN 'HTTP 500' END, 'bench:1'"
                " FROM {0}.tasks AS t, generate_series(1, %s) AS k"
            ).format(name),
            [T0, T0, T0, T0, runs],
        )
        for table in ("tasks", "runs"):
            await conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(schema, table)))


async def drop(url: str, schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


def server_cpu(pid: int) -> float:
    """CPU seconds the server process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(client: httpx.Client, label: str, path: str, requests: int, pid: int) -> str:
    for _ in range(WARM_UP):
        client.get(path).raise_for_status()
    cpu_before = server_cpu(pid)
    servers, walls = [], []
    body = ""
    for _ in range(requests):
        start = time.perf_counter()
        answer = client.get(path)
        walls.append((time.perf_counter() - start) * 1000)
        answer.raise_for_status()
        found = re.search(r"app;dur=([\d.]+)", answer.headers["server-timing"])
        assert found, answer.headers
        servers.append(float(found.group(1)))
        body = answer.text
    quantiles = statistics.quantiles(servers, n=20, method="inclusive")  # never past the max
    figure(f"{label}_server_p50_ms", statistics.median(servers))
    figure(f"{label}_server_p95_ms", quantiles[18])
    figure(f"{label}_server_max_ms", max(servers))
    figure(f"{label}_wall_p50_ms", statistics.median(walls))
    # CPU per answer says what the page costs when the machine is shared and busy.
    figure(f"{label}_server_cpu_ms", (server_cpu(pid) - cpu_before) * 1000 / requests)
    return body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument(
        "--database-url", default=os.environ.get("SCHEDULER_TEST_DATABASE_URL", DEFAULT_URL)
    )
    args = parser.parse_args()
    schema = f"bench_console_{uuid.uuid4().hex[:8]}"
    environ = {
        "SCHEDULER_DATABASE_URL": args.database_url,
        "SCHEDULER_SCHEMA": schema,
        "SCHEDULER_LOG_LEVEL": "WARNING",
    }
    try:
        began = time.perf_counter()
        asyncio.run(fill(args.database_url, schema, args.tasks, args.runs))
        figure("tasks", args.tasks)
        figure("runs", args.tasks * args.runs)
        figure("fill_s", time.perf_counter() - began)
        with (
            LiveServer(environ, ["--no-engine"]) as server,
            httpx.Client(base_url=server.url, timeout=30) as client,
        ):
            assert server.process is not None
            pid = server.process.pid
            figure("load_average_1m", os.getloadavg()[0])
            first = measure(client, "tasks_first_page", "/ui/", args.requests, pid)
            rows = first.count('<th scope="row"')
            figure("tasks_first_page_rows", rows)
            cursor = re.search(r'rel="next" href="/ui/\?cursor=([^"]+)"', first)
            assert cursor, "the first page has no next page"
            measure(
                client, "tasks_second_page", f"/ui/?cursor={cursor.group(1)}", args.requests, pid
            )
            measure(client, "tasks_filtered", "/ui/?name=bench-099&tag=odd", args.requests, pid)
            measure(client, "task_page", "/ui/tasks/bench-05000", args.requests, pid)
        figure("load_average_1m_end", os.getloadavg()[0])
    finally:
        asyncio.run(drop(args.database_url, schema))


if __name__ == "__main__":
    main()
