"""Backfill on PostgreSQL (issue 10, "Speed"): how long a backfill of N occurrences takes
to be accepted, and how fast its queue drains against a target of known capacity.

In a schema of its own (dropped at the end), through the real API (the Litestar app in
this process, with its engine claiming and calling): a task firing every minute (cron)
with `overlap: buffer_all` and `max_running_instances` M, calling a local target (a
process of its own) that answers 200 after `--delay-ms`. Then:

- accept: `POST /tasks/{id}/backfill` of the last N fire times, first as a dry run, then
  for real (one transaction, N runs): the seconds each answer took;
- drain: the seconds from that answer until the backfill's N runs have all finished,
  the runs per second, and the target's capacity beside it (M slots / delay), so the
  ratio says how close the queue comes to the pace the target allows.

One figure per line, `name value`. The goals: accepted in under 1 s for N = 1,000, and a
drain at the target's pace (no claim pass scans the queue: each start reads the head).

`--trace` also says where a slot's turn goes: it times, in this process, each call the
executor makes and each transaction that records outcomes and starts queued runs
(`finish_runs_starting`), and prints their medians, the outcomes each such transaction
recorded and the runs it started, and the medians of the two gaps between them (a call's
end to the next such transaction's start; its end to the next call's start).

    python bench/backfill.py [-n 1000] [--slots 4] [--delay-ms 20] [--url URL] [--trace]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import targets  # bench/targets.py

from adapters.postgres import initialize
from entrypoints.container import build_container
from entrypoints.http.app import create_app
from entrypoints.settings import Settings

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


# -- the measurement ------------------------------------------------------------------


async def finished_count(client: AsyncTestClient[Any], backfill_id: str) -> int:
    """How many of the backfill's runs have finished (GET /backfills/{id} counts them:
    reading every run page instead cost the engine's event loop more than the drain)."""
    answer = (await client.get(f"/backfills/{backfill_id}")).json()
    return int(answer["runs"]["finished"])


class Timeline:
    """The calls and finish transactions of one drain, timed by wrapping the container's
    executor and store (`--trace`): (start, end) of each, and each finish's sizes."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, float]] = []
        self.finishes: list[tuple[float, float, int, int]] = []
        self.finish_cpu: list[float] = []  # the event loop thread's CPU during each

    def watch(self, container: Any) -> None:
        executor, store = container.executor(), container.task_store()
        execute, finish = executor.execute, store.finish_runs_starting

        async def timed_execute(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return await execute(*args, **kwargs)
            finally:
                self.calls.append((began, time.perf_counter()))

        async def timed_finish(outcomes: Any, *args: Any, **kwargs: Any) -> Any:
            began, cpu = time.perf_counter(), time.thread_time()
            freed = await finish(outcomes, *args, **kwargs)
            self.finish_cpu.append(time.thread_time() - cpu)
            self.finishes.append((began, time.perf_counter(), len(outcomes), len(freed.started)))
            return freed

        executor.execute = timed_execute
        store.finish_runs_starting = timed_finish

    def print(self) -> None:
        if not self.calls or not self.finishes:
            return
        ms = 1000.0
        print(f"trace_call_ms_median {statistics.median(e - b for b, e in self.calls) * ms:.2f}")
        durations = [e - b for b, e, _, _ in self.finishes]
        print(f"trace_finish_ms_median {statistics.median(durations) * ms:.2f}")
        print(f"trace_finish_cpu_ms_median {statistics.median(self.finish_cpu) * ms:.2f}")
        print(f"trace_finish_outcomes_mean {statistics.mean(f[2] for f in self.finishes):.2f}")
        print(f"trace_finish_started_mean {statistics.mean(f[3] for f in self.finishes):.2f}")
        starts = sorted(b for b, _, _, _ in self.finishes)
        print(f"trace_call_end_to_finish_ms_median {_gap(self.calls, starts) * ms:.2f}")
        ends = [(e, e) for _, e, _, _ in self.finishes]
        calls = sorted(b for b, _ in self.calls)
        print(f"trace_finish_end_to_call_ms_median {_gap(ends, calls) * ms:.2f}")


def _gap(spans: list[tuple[float, float]], following: list[float]) -> float:
    """The median time from each span's end to the first of `following` after it."""
    gaps = []
    for _, end in spans:
        at = bisect.bisect_left(following, end)
        if at < len(following):
            gaps.append(following[at] - end)
    return statistics.median(gaps) if gaps else float("nan")


async def measure(
    url: str, schema: str, n: int, slots: int, delay: float, trace: Timeline | None = None
) -> None:
    process, port = targets.start(targets.Fixed(delay=delay))  # 200 after `delay`, kept alive
    settings = Settings(
        database_url=url,
        db_schema=schema,
        api_tokens="",
        host="127.0.0.1",
        pool_size=8,
        target_allow="127.0.0.1",
        max_concurrent_runs=max(100, slots),
    )
    container = build_container(settings)
    if trace is not None:
        trace.watch(container)
    app = create_app(container)
    now = datetime.now(UTC).replace(microsecond=0)
    try:
        async with AsyncTestClient(app=app) as client:
            created = await client.post(
                "/tasks",
                json={
                    "name": "bench-backfill",
                    # Every minute: its own occurrences queue beside the backfill's.
                    "trigger": {"kind": "cron", "expression": "* * * * *"},
                    "target": {"url": f"http://127.0.0.1:{port}/hook", "timeout_seconds": 30},
                    "overlap": "buffer_all",
                    "max_running_instances": slots,
                },
            )
            assert created.status_code == 201, created.text
            task_id = created.json()["id"]
            # The last n fire times (minute boundaries) up to now, none of them run.
            body = {"start": _iso(now - timedelta(minutes=n, seconds=-1)), "end": _iso(now)}
            for label, dry_run in (("dry_run", True), ("accept", False)):
                start = time.perf_counter()
                answer = await client.post(
                    f"/tasks/{task_id}/backfill", json={**body, "dry_run": dry_run}
                )
                took = time.perf_counter() - start
                assert answer.status_code in (200, 202), answer.text
                print(f"backfill_{label}_seconds {took:.3f}")
            backfill = answer.json()
            print(f"backfill_runs {backfill['runs']}")
            # The runs it made: n, or one fewer when `now` fell on a minute boundary.
            n = backfill["runs"]
            began, cpu_began = time.perf_counter(), time.process_time()
            while (done := await finished_count(client, backfill["backfill_id"])) < n:
                if time.perf_counter() - began > 600:
                    raise SystemExit(f"only {done} of {n} runs finished in 600 s")
                await asyncio.sleep(0.25)
            drained = time.perf_counter() - began
            cpu = time.process_time() - cpu_began
            print(f"drain_seconds {drained:.2f}")
            print(f"drain_runs_per_second {n / drained:.1f}")
            print(f"target_capacity_runs_per_second {slots / delay:.1f}")
            print(f"drain_share_of_capacity {n / drained / (slots / delay):.2f}")
            # The process's CPU (engine, API, PostgreSQL client) per run drained: a
            # figure a loaded machine disturbs less than the rate.
            print(f"drain_cpu_ms_per_run {cpu / n * 1000:.2f}")
            if trace is not None:
                trace.print()
    finally:
        process.terminate()


def _iso(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


async def run(url: str, n: int, slots: int, delay: float, trace: bool) -> None:
    schema = f"bench_backfill_{uuid.uuid4().hex[:8]}"
    await initialize(url, schema)
    print(f"load_average_start {os.getloadavg()[0]:.2f}")
    try:
        await measure(url, schema, n, slots, delay, Timeline() if trace else None)
    finally:
        print(f"load_average_end {os.getloadavg()[0]:.2f}")
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-n", type=int, default=1000, help="occurrences to backfill")
    parser.add_argument("--slots", type=int, default=4, help="max_running_instances")
    parser.add_argument("--delay-ms", type=float, default=20, help="the target's answer time")
    parser.add_argument("--url", default=os.environ.get("SCHEDULER_DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--trace", action="store_true", help="time the calls and finishes")
    args = parser.parse_args()
    asyncio.run(run(args.url, args.n, args.slots, args.delay_ms / 1000, args.trace))


if __name__ == "__main__":
    main()
