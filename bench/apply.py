"""`POST /tasks/apply` with many tasks: how long one all-or-nothing apply takes.

On a schema of its own, through the real API (the Litestar app in this process, on
PostgreSQL, without its engine), applies `--tasks` task specs three times and prints the
seconds each took: every task created, the same list again (every task unchanged), and
every task changed (a new description: every task updated, with its history version);
then 50 applies of one of those tasks alone (unchanged), beside all the others.
The CPU seconds are this process's (the API and the client in it; the database's are
not counted). The schema is dropped at the end. The goal: 10,000 tasks in under 5 s.

`--held` makes every apply hold its tasks from its first attempt, as one does after
losing three attempts to other writers (application/sync.py, UNHELD_ATTEMPTS): the
seconds then are how long the tasks stay locked, claims passing over them.

    python bench/apply.py [--tasks N] [--url URL] [--held]

The URL comes from --url, else SCHEDULER_DATABASE_URL, else the local server's `test`
database.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from litestar.testing import AsyncTestClient
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import application.sync
from adapters.postgres import initialize
from entrypoints.container import build_container
from entrypoints.http.app import create_app
from entrypoints.settings import Settings

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


def specs(count: int, description: str) -> list[dict[str, Any]]:
    return [
        {
            "name": f"bench-{i}",
            "description": description,
            "trigger": {"kind": "cron", "expression": f"{i % 60} * * * *"},
            "target": {"url": f"http://127.0.0.1:9/hook/{i}"},
            "tags": ["bench"],
        }
        for i in range(count)
    ]


async def run(url: str, count: int) -> None:
    schema = f"bench_apply_{uuid.uuid4().hex[:8]}"
    await initialize(url, schema)
    settings = Settings(database_url=url, db_schema=schema, api_tokens="", host="127.0.0.1")
    app = create_app(build_container(settings), run_engine=False)
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    try:
        async with AsyncTestClient(app=app, timeout=600) as client:
            for label, description in (
                ("created", "first"),
                ("unchanged", "first"),
                ("updated", "second"),
            ):
                body = {"tasks": specs(count, description), "prune": True}
                start, cpu = time.perf_counter(), time.process_time()
                response = await client.post("/tasks/apply", json=body)
                elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
                assert response.status_code == 200, response.text
                assert len(response.json()[label]) == count, response.json()
                print(f"{count} tasks {label:9} in {elapsed:6.2f} s, {cpu:6.2f} CPU s")
            await one_task_applies(client, count)
    finally:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


async def one_task_applies(client: AsyncTestClient[Any], count: int) -> None:
    """A deploy of one task's file (no prune) beside the `count` stored: what it costs
    is the part of the table it reads."""
    [spec] = specs(1, "second")
    seconds = []
    for _ in range(SMALL_APPLIES):
        start = time.perf_counter()
        response = await client.post("/tasks/apply", json={"tasks": [spec]})
        seconds.append(time.perf_counter() - start)
        assert response.json()["unchanged"] == [spec["name"]], response.text
    seconds.sort()
    p50, top = seconds[len(seconds) // 2] * 1000, seconds[-1] * 1000
    print(f"1-task apply beside {count} tasks: p50 {p50:.1f} ms, max {top:.1f} ms")


SMALL_APPLIES = 50


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--url", default=os.environ.get("SCHEDULER_DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--held", action="store_true", help="hold the tasks from the start")
    args = parser.parse_args()
    if args.held:
        application.sync.UNHELD_ATTEMPTS = 0
    print(f"held from the first attempt: {'yes' if args.held else 'no'}")
    asyncio.run(run(args.url, args.tasks))


if __name__ == "__main__":
    main()
