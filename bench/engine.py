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
clock. One figure per line, `name value`.

    python bench/engine.py [--url URL] [--scenario burst,steady,idle] [--burst 10000]
        [--steady 1000] [--idle 100000] [--seconds 30]

`--scenario` also takes burst_noop and burst_http, one half of the burst each, and
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
import json
import multiprocessing as mp
import os
import statistics
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import targets  # bench/targets.py

from adapters.clock import SystemClock
from adapters.http import HttpExecutor
from adapters.memory import NoopExecutor
from adapters.postgres import PostgresTaskStore, PostgresWaker, create_pool, initialize
from application.engine import TriggerLoop
from application.engine_settings import EngineSettings
from application.events import EventSender
from application.ports import Executor
from domain.events import EventStatus
from domain.runs import ClaimedRun, Run
from domain.tasks import HttpTarget, Notify
from domain.triggers import IntervalTrigger

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
SCHEMA = "scheduler"
# The engine's ceiling on runs in flight and its pool size (spawned replicas read the
# same environment); the defaults are the product's.
MAX_CONCURRENT_RUNS = int(os.environ.get("BENCH_MAX_CONCURRENT_RUNS", "100"))
POOL_SIZE = int(os.environ.get("BENCH_POOL_SIZE", "10"))


def figure(name: str, value: float | int) -> None:
    text = f"{value:.4f}" if isinstance(value, float) else str(value)
    print(f"{name} {text}", flush=True)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


# -- the local target ---------------------------------------------------------------


class _Recorder:
    """What the target saw: Idempotency-Keys, arrival times, lateness per request."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.keys: list[str] = []
        self.received: list[float] = []
        self.scheduled: list[float] = []
        self.events = 0

    def handle(self, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
        """The status and body of the answer: 200, or 500 under `/fail` (a target that
        always fails); `/events` receives events (counted apart from calls)."""
        if path.startswith("/_reset"):
            self.reset()
            return 200, b"{}"
        if path.startswith("/_stats"):
            query = dict(p.split("=", 1) for p in path.partition("?")[2].split("&") if p)
            return 200, json.dumps(self.stats(query)).encode()
        if path.startswith("/events"):
            self.events += 1
            return 200, b"ok"
        now = time.time()
        scheduled = headers.get("x-scheduler-scheduled-for", "")
        self.keys.append(headers.get("idempotency-key", ""))
        self.received.append(now)
        self.scheduled.append(datetime.fromisoformat(scheduled.replace("Z", "+00:00")).timestamp())
        return (500, b"failing") if path.startswith("/fail") else (200, b"ok")

    def stats(self, query: dict[str, str]) -> dict[str, float]:
        since = float(query.get("since", "-inf"))
        until = float(query.get("until", "inf"))
        picked = [
            (r, s) for r, s in zip(self.received, self.scheduled, strict=True) if since <= s < until
        ]
        lateness = [r - s for r, s in picked]
        return {
            "requests": len(picked),
            "duplicates": len(self.keys) - len(set(self.keys)),
            "last_received": max((r for r, _ in picked), default=float("nan")),
            "lateness_p50": percentile(lateness, 0.5),
            "lateness_p99": percentile(lateness, 0.99),
            "events": self.events,
        }


class _Recording:
    """The target of bench/targets.py that answers as `_Recorder.handle` says, at once,
    kept alive."""

    delay = 0.0
    close = False

    def __init__(self) -> None:
        self.recorder = _Recorder()  # in the target's process

    def answer(self, head: bytes) -> bytes:
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        status, body = self.recorder.handle(lines[0].split(" ")[1], headers)
        return targets.response(status, body)


class TargetClient:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def url(self, path: str) -> str:
        return self.base + path

    def reset(self) -> None:
        urllib.request.urlopen(self.url("/_reset"), timeout=10).read()

    def stats(self, since: float | None = None, until: float | None = None) -> dict[str, Any]:
        query = "&".join(
            f"{k}={v}" for k, v in (("since", since), ("until", until)) if v is not None
        )
        with urllib.request.urlopen(self.url(f"/_stats?{query}"), timeout=60) as answer:
            result: dict[str, Any] = json.loads(answer.read())
        return result


@contextmanager
def start_target() -> Iterator[TargetClient]:
    """The local target, in a process of its own."""
    process, port = targets.start(_Recording())
    try:
        yield TargetClient(port)
    finally:
        process.terminate()
        process.join()


# -- database -----------------------------------------------------------------------


@contextmanager
def bench_database(url: str) -> Iterator[str]:
    """A database of its own for this run, dropped afterwards."""
    name = f"bench_engine_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    params = conninfo_to_dict(url)
    params["dbname"] = name
    try:
        yield make_conninfo("", **params)
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def fresh_schema(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))
    asyncio.run(initialize(url, SCHEMA))


def fill(url: str, count: int, every: int, due: datetime, target_url: str) -> None:
    """`count` interval tasks, all next due at `due`."""
    trigger = IntervalTrigger(every=every, anchor=due).model_dump(mode="json")
    target = HttpTarget(url=target_url, timeout_seconds=10).model_dump(mode="json")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.tasks (id, name, trigger, target, misfire_grace_seconds,"
                " next_fire_at, next_run_at, created_at, updated_at)"
                " SELECT gen_random_uuid(), 'bench-' || i, %s, %s, 60, %s, %s, %s, %s"
                " FROM generate_series(1, %s) AS i"
            ).format(sql.Identifier(SCHEMA)),
            [Jsonb(trigger), Jsonb(target), due, due, due, due, count],
        )
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(SCHEMA, "tasks")))


def count_finished(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {}.runs WHERE status <> 'running'").format(
                sql.Identifier(SCHEMA)
            )
        ).fetchone()
    return int(row[0]) if row else 0


def transactions(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database"
            " WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


# -- one replica --------------------------------------------------------------------


class StartTimes:
    """Observer: when each run's call began (wall clock), for the no-op burst."""

    def __init__(self) -> None:
        self.started: list[float] = []

    def claim_batch(self, count: int, seconds: float) -> None:
        pass

    def run_started(self, claimed_run: ClaimedRun, lateness_seconds: float) -> None:
        self.started.append(time.time())

    def run_finished(self, run: Run, duration_seconds: float) -> None:
        pass

    def store_error(self, exc: BaseException) -> None:
        pass

    def in_flight(self, n: int) -> None:
        pass


async def run_replica(
    url: str,
    name: str,
    executor: Executor,
    window: tuple[float, float],
    stop_at: float,
    observer: StartTimes | None = None,
) -> dict[str, Any]:
    """Run one engine until `stop_at` (epoch seconds); report its CPU over `window`."""
    pool = create_pool(url, min_size=2, max_size=POOL_SIZE)
    await pool.open(wait=True)
    waker = PostgresWaker(url, SCHEMA)
    engine = TriggerLoop(
        PostgresTaskStore(pool, SCHEMA),
        waker,
        executor,
        SystemClock(),
        EngineSettings(replica=name, max_concurrent_runs=MAX_CONCURRENT_RUNS),
        observer,
    )
    await engine.start()
    await asyncio.sleep(max(0.0, window[0] - time.time()))
    cpu = time.process_time()
    await asyncio.sleep(max(0.0, window[1] - time.time()))
    cpu = time.process_time() - cpu
    await asyncio.sleep(max(0.0, stop_at - time.time()))
    await engine.stop()
    await executor.close()
    await waker.close()
    await pool.close()
    return {"name": name, "cpu": cpu}


def replica_process(
    url: str, name: str, http: bool, window: tuple[float, float], stop_at: float, out: Any
) -> None:
    executor: Executor = HttpExecutor() if http else NoopExecutor()
    out.put(asyncio.run(run_replica(url, name, executor, window, stop_at)))


def run_replicas(
    url: str, count: int, http: bool, window: tuple[float, float], stop_at: float
) -> list[dict[str, Any]]:
    context = mp.get_context("spawn")
    out = context.Queue()
    processes = [
        context.Process(
            target=replica_process, args=(url, f"bench-{i}", http, window, stop_at, out)
        )
        for i in range(count)
    ]
    for process in processes:
        process.start()
    results = [out.get() for _ in processes]
    for process in processes:
        process.join()
    return results


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
        if "steady" in scenarios:
            for replicas in (1, 3):
                steady(url, args.steady, replicas, args.seconds, target)
        if "idle" in scenarios:
            idle(url, args.idle, args.seconds, target)
    figure("load_average_at_end", os.getloadavg()[0])


if __name__ == "__main__":
    main()
