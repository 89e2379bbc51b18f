"""Speed of the native engine against PostgreSQL (issue 4, "Speed").

Scenarios, each in a schema of its own inside a database created for the run (so that
`pg_stat_database` counts this benchmark's transactions only), dropped at the end:

- burst: N tasks (10,000) due at one instant; time until all have fired and all are
  recorded, lateness p50/p99; once with the no-op executor, once with the real HTTP
  executor against a local target (a separate process, so it never competes with the
  engine for the GIL);
- steady: 1,000 tasks on a 1-second interval for 30 s, with 1 and 3 replicas (separate
  processes): deliveries per second, lateness p50/p99 at the target, duplicates by
  Idempotency-Key, scheduler CPU per delivery;
- idle: 100,000 tasks due far in the future: the engine's CPU seconds and the
  database's transactions per second over 30 s.

Engines run with their default settings (batch 100, 100 runs in flight) on the system
clock, without metrics or log handler; `BENCH_SERVED=1` makes the steady scenario's
replicas observe and log as `serve` wires them (Prometheus metrics, a JSON line per run
at INFO, written to /dev/null): the all-in cost of a fire. Every engine tunes its garbage
collector once started, as `serve` does; `BENCH_DEFAULT_GC=1` keeps CPython's defaults.
One figure per line, `name value`.

    python bench/engine.py [--url URL] [--scenario burst,steady,idle] [--burst 10000]
        [--steady 1000] [--idle 100000] [--seconds 30]

`--scenario` also takes backlog (`--burst` tasks whose time passed half an hour ago, beyond
their grace: each claim records missed runs and calls nothing, the claim path through
the engine alone), burst_noop and burst_http, one half of the burst each, and
burst_failing: the HTTP burst against a target that always fails, without and then
with `notify` on every task (a `run.failed` event per run, delivered by an event
sender on the same replica meanwhile, wired as the product wires it: it gives way
while the engine is behind), for what events cost the claim path;
`_engine_behind_fraction` is how much of the burst that was, and
`_events_all_sent_seconds` when the last event was sent. The load
average (1 minute) is printed at the start and the end: other work on the machine moves
every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.clock import SystemClock
from adapters.http import HttpExecutor
from adapters.memory import NoopExecutor
from adapters.postgres import PostgresTaskStore, PostgresWaker, create_pool
from application.engine import TriggerLoop
from application.engine_settings import EngineSettings
from application.events import EventSender
from application.ports import Executor
from bench.engine_harness import (
    DEFAULT_URL,
    MAX_CONCURRENT_RUNS,
    POOL_SIZE,
    SCHEMA,
    StartTimes,
    bench_database,
    count_finished,
    figure,
    fill,
    fresh_schema,
    percentile,
    run_replicas,
    start_target,
    started_up,
    transactions,
)
from domain.events import EventStatus
from domain.tasks import Notify

# -- scenarios ----------------------------------------------------------------------


def burst(url: str, count: int, http: bool, target: Any, *, notify: bool | None = None) -> None:
    """`notify` None: the target answers 200; False: it always fails (500), and True:
    it always fails and every task has `notify`, so each run also writes a `run.failed`
    event, which an event sender on the same replica delivers meanwhile."""
    label = "burst_http" if http else "burst_noop"
    if notify is not None:
        label = "burst_failing_notify" if notify else "burst_failing"
    fresh_schema(url)
    target.reset()
    due = datetime.fromtimestamp(int(time.time()) + 3, UTC)
    fill(url, count, 3600, due, target.url("/hook" if notify is None else "/fail"))
    if notify:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("UPDATE {}.tasks SET notify = %s").format(sql.Identifier(SCHEMA)),
                [Jsonb(Notify(url=target.url("/events")).model_dump(mode="json"))],
            )
    observer = StartTimes()
    executor: Executor = HttpExecutor() if http else NoopExecutor()
    samples: list[bool] = []  # whether the engine was behind, every 50 ms

    async def main() -> tuple[float, float, float | None]:
        """When all were recorded, the CPU seconds until then, and when the last event
        was sent (None without events)."""
        pool = create_pool(url, min_size=2, max_size=POOL_SIZE)
        await pool.open(wait=True)
        waker = PostgresWaker(url, SCHEMA)
        store = PostgresTaskStore(pool, SCHEMA)
        engine = TriggerLoop(
            store,
            waker,
            executor,
            SystemClock(),
            EngineSettings(replica=label, max_concurrent_runs=MAX_CONCURRENT_RUNS),
            observer,
        )
        await engine.start()
        started_up()
        sender = None

        def busy() -> bool:  # as entrypoints/container.py wires the product's sender
            return engine.behind

        if notify and isinstance(executor, HttpExecutor):
            sender = EventSender(store.outbox, executor, SystemClock(), busy=busy)
            await sender.start()
        finished_at = time.time() + 300
        while time.time() < finished_at:
            await asyncio.sleep(0.05)
            if time.time() >= due.timestamp():
                samples.append(busy())
            if (
                len(observer.started) >= count
                and await asyncio.to_thread(count_finished, url) >= count
            ):
                finished_at = time.time()
                break
        cpu_at_finish = time.process_time()
        await engine.stop()
        all_sent = None
        if sender is not None:  # the events left once the burst is recorded
            give_up = time.time() + 300
            while time.time() < give_up:
                if not await store.outbox.count_events(EventStatus.PENDING):
                    break
                await asyncio.sleep(0.05)
            all_sent = time.time()
            await sender.stop()
        await executor.close()
        await waker.close()
        await pool.close()
        return finished_at, cpu_at_finish, all_sent

    cpu = time.process_time()
    recorded, cpu_at_finish, all_sent = asyncio.run(main())
    cpu = cpu_at_finish - cpu
    start = due.timestamp()
    if http:
        stats = target.stats()
        figure(f"{label}_all_fired_seconds", stats["last_received"] - start)
        figure(f"{label}_lateness_p50_seconds", stats["lateness_p50"])
        figure(f"{label}_lateness_p99_seconds", stats["lateness_p99"])
        figure(f"{label}_deliveries", stats["requests"])
        figure(f"{label}_duplicates", stats["duplicates"])
        if notify:
            figure(f"{label}_events_delivered", stats["events"])
        if notify is not None:  # how much of the burst the sender would give way
            figure(f"{label}_engine_behind_fraction", sum(samples) / max(len(samples), 1))
        if all_sent is not None:
            figure(f"{label}_events_all_sent_seconds", all_sent - due.timestamp())
    else:
        lateness = [t - start for t in observer.started]
        figure(f"{label}_all_fired_seconds", max(lateness))
        figure(f"{label}_lateness_p50_seconds", percentile(lateness, 0.5))
        figure(f"{label}_lateness_p99_seconds", percentile(lateness, 0.99))
    figure(f"{label}_all_recorded_seconds", recorded - start)
    figure(f"{label}_engine_cpu_seconds", cpu)


def backlog(url: str, count: int) -> None:
    """N hourly tasks whose last occurrence passed half an hour ago, beyond their 60 s
    grace (a replica starting after an outage): every claim records a missed run and
    calls nothing, so this is the engine's claim path alone. The seconds from the
    engine's start until every task has its run, and the engine's CPU seconds meanwhile."""
    fresh_schema(url)
    fill(
        url,
        count,
        3600,
        datetime.fromtimestamp(int(time.time()) - 5400, UTC),
        "http://127.0.0.1:9/",
    )

    class Claimed(StartTimes):
        """Counts the runs claimed, and says when every task has its run."""

        def __init__(self) -> None:
            super().__init__()
            self.claimed = 0
            self.all = asyncio.Event()

        def claim_batch(self, count: int, seconds: float) -> None:
            self.claimed += count
            if self.claimed >= count_all:
                self.all.set()

    count_all = count

    async def main() -> tuple[float, float]:
        pool = create_pool(url, min_size=2, max_size=POOL_SIZE)
        await pool.open(wait=True)
        waker = PostgresWaker(url, SCHEMA)
        store = PostgresTaskStore(pool, SCHEMA)
        settings = EngineSettings(replica="backlog", max_concurrent_runs=MAX_CONCURRENT_RUNS)
        observer = Claimed()
        engine = TriggerLoop(store, waker, NoopExecutor(), SystemClock(), settings, observer)
        started_up()
        began, cpu = time.perf_counter(), time.process_time()
        await engine.start()
        await asyncio.wait_for(observer.all.wait(), 300)
        took, cpu = time.perf_counter() - began, time.process_time() - cpu
        await engine.stop()
        await waker.close()
        await pool.close()
        if await asyncio.to_thread(count_finished, url) != count:
            raise SystemExit("a task has no run, or more than one")
        return took, cpu

    took, cpu = asyncio.run(main())
    figure("backlog_all_claimed_seconds", took)
    figure("backlog_occurrences_per_second", count / took)
    figure("backlog_engine_cpu_seconds", cpu)


def steady(url: str, count: int, replicas: int, seconds: float, target: Any) -> None:
    label = f"steady_{replicas}"
    fresh_schema(url)
    target.reset()
    start = int(time.time()) + 6  # replicas start in fresh processes meanwhile
    fill(url, count, 1, datetime.fromtimestamp(start, UTC), target.url("/hook"))
    window = (float(start), start + seconds)
    xacts = transactions(url)
    results = run_replicas(url, replicas, True, window, window[1] + 3)
    xacts = transactions(url) - xacts
    stats = target.stats(since=window[0], until=window[1])
    delivered = stats["requests"]
    cpu = sum(r["cpu"] for r in results)
    figure(f"{label}_deliveries_per_second", delivered / seconds)
    figure(f"{label}_lateness_p50_seconds", stats["lateness_p50"])
    figure(f"{label}_lateness_p99_seconds", stats["lateness_p99"])
    figure(f"{label}_duplicates", target.stats()["duplicates"])
    figure(f"{label}_cpu_ms_per_delivery", 1000 * cpu / max(delivered, 1))
    figure(f"{label}_cpu_seconds_per_second", cpu / seconds)
    figure(f"{label}_db_transactions_per_second", xacts / (seconds + 9))


def idle(url: str, count: int, seconds: float, target: Any) -> None:
    fresh_schema(url)
    far = datetime.fromtimestamp(int(time.time()), UTC) + timedelta(days=7)
    fill(url, count, 3600, far, target.url("/hook"))
    began = time.time() + 5  # let the replica start and settle
    window = (began, began + seconds)
    box: dict[str, int] = {}

    def sample() -> None:
        time.sleep(max(0.0, window[0] - time.time()))
        box["before"] = transactions(url)
        time.sleep(max(0.0, window[1] - time.time()))
        box["after"] = transactions(url)

    thread = threading.Thread(target=sample)
    thread.start()
    [result] = run_replicas(url, 1, True, window, window[1] + 0.5)
    thread.join()
    # Two of the counted transactions are the sampler's own reads.
    per_second = max(0, box["after"] - box["before"] - 1) / seconds
    figure("idle_engine_cpu_seconds", result["cpu"])
    figure("idle_db_transactions_per_second", per_second)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("SCHEDULER_DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--scenario", default="burst,steady,idle")
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--steady", type=int, default=1_000)
    parser.add_argument("--idle", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    scenarios = set(args.scenario.split(","))
    figure("cpus", os.cpu_count() or 0)
    figure("load_average_at_start", os.getloadavg()[0])
    figure("max_concurrent_runs", MAX_CONCURRENT_RUNS)
    figure("pool_size", POOL_SIZE)
    with bench_database(args.url) as url, start_target() as target:
        if scenarios & {"burst", "burst_noop"}:
            burst(url, args.burst, False, target)
        if scenarios & {"burst", "burst_http"}:
            burst(url, args.burst, True, target)
        if "burst_failing" in scenarios:  # events: the same burst with and without notify
            burst(url, args.burst, True, target, notify=False)
            burst(url, args.burst, True, target, notify=True)
        if "backlog" in scenarios:
            backlog(url, args.burst)
        if "steady" in scenarios:
            for replicas in (1, 3):
                steady(url, args.steady, replicas, args.seconds, target)
        if "idle" in scenarios:
            idle(url, args.idle, args.seconds, target)
    figure("load_average_at_end", os.getloadavg()[0])


if __name__ == "__main__":
    main()
