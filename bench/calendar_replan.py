"""A calendar PATCH that re-plans many tasks: how long the one transaction takes.

On a schema of its own, through the real API (the Litestar app in this process, on
PostgreSQL, without its engine): creates a calendar, applies `--tasks` daily cron tasks
naming it (in one `POST /tasks/apply`, no two with the same trigger), then PATCHes the
calendar twice (closing the date of the first task's next fire time, then opening it
again) and prints the seconds each PATCH took, each re-planning every task with a
history version. The schema is dropped at
the end. The goal: 10,000 tasks re-planned by one PATCH in under 5 s.

    python bench/calendar_replan.py [--tasks N] [--policy POLICY] [--url URL]

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
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from litestar.testing import AsyncTestClient
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.postgres import initialize
from entrypoints.container import build_container
from entrypoints.http.app import create_app
from entrypoints.settings import Settings

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
CALENDAR = "bench-closures"
ZONES = ("UTC", "Europe/London", "America/New_York", "Asia/Tokyo", "Australia/Sydney")


def specs(count: int, policy: str) -> list[dict[str, Any]]:
    """Daily cron tasks, no two with the same trigger (minute, hour and zone differ up to
    7,200 tasks): the worst case, where no task's search serves another's."""
    return [
        {
            "name": f"bench-{i}",
            "trigger": {
                "kind": "cron",
                "expression": f"{i % 60} {(i // 60) % 24} * * *",
                "timezone": ZONES[(i // 1440) % len(ZONES)],
                "calendar": {"name": CALENDAR, "policy": policy},
            },
            "target": {"url": f"http://127.0.0.1:9/hook/{i}"},
        }
        for i in range(count)
    ]


# Tasks per `POST /tasks/apply` (without prune, so each adds to the last).
APPLY_CHUNK = 2_000


async def run(url: str, count: int, policy: str) -> None:
    schema = f"bench_calendar_{uuid.uuid4().hex[:8]}"
    await initialize(url, schema)
    settings = Settings(database_url=url, db_schema=schema, api_tokens="", host="127.0.0.1")
    app = create_app(build_container(settings), run_engine=False)
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    try:
        async with AsyncTestClient(app=app, timeout=600) as client:
            made = await client.post("/calendars", json={"name": CALENDAR, "weekdays": ["SUN"]})
            assert made.status_code == 201, made.text
            start = time.perf_counter()
            every = specs(count, policy)
            for chunk in range(0, count, APPLY_CHUNK):  # one apply body stays under 1 MiB
                tasks = every[chunk : chunk + APPLY_CHUNK]
                applied = await client.post("/tasks/apply", json={"tasks": tasks})
                assert applied.status_code == 200, applied.text
            print(
                f"{count} tasks naming the calendar created in {time.perf_counter() - start:6.2f} s"
            )
            first = (await client.get("/tasks/bench-0")).json()["next_run_at"]
            day = datetime.fromisoformat(first).date().isoformat()
            for label, dates in (("closing", [day]), ("opening", [])):
                start = time.perf_counter()
                response = await client.patch(f"/calendars/{CALENDAR}", json={"dates": dates})
                elapsed = time.perf_counter() - start
                assert response.status_code == 200, response.text
                print(
                    f"PATCH {label} {day} ({policy}): {count} tasks re-planned in {elapsed:6.2f} s"
                )
            history = (await client.get("/tasks/bench-0/history", params={"limit": 1})).json()
            assert history["items"][0]["cause"] == "calendar", history
    finally:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--url", default=os.environ.get("SCHEDULER_DATABASE_URL", DEFAULT_URL))
    parser.add_argument(
        "--policy",
        default="next_business_day",
        choices=("exclude", "next_business_day", "previous_business_day"),
        help="the tasks' calendar policy (a roll forward is the dearest search)",
    )
    args = parser.parse_args()
    asyncio.run(run(args.url, args.tasks, args.policy))


if __name__ == "__main__":
    main()
