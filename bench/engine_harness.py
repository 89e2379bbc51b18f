"""What bench/engine.py and bench/fleet.py share: the figures' printing, the local
recording target (a process of its own), a database of the bench's own with its task
fill, and engine replicas run in processes of their own.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
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
from application.observer import EngineObserver
from application.ports import Executor
from domain.runs import ClaimedRun, Run
from domain.tasks import HttpTarget
from domain.triggers import IntervalTrigger
from entrypoints.gc_tuning import tune_garbage_collector
from entrypoints.logs import configure_logging
from entrypoints.metrics import PrometheusObserver

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
SCHEMA = "scheduler"
# The engine's ceiling on runs in flight and its pool size (spawned replicas read the
# same environment); the defaults are the product's.
MAX_CONCURRENT_RUNS = int(os.environ.get("BENCH_MAX_CONCURRENT_RUNS", "100"))
POOL_SIZE = int(os.environ.get("BENCH_POOL_SIZE", "10"))
# BENCH_SERVED=1: replica processes observe and log as `serve` wires them (Prometheus
# metrics, INFO logging as JSON lines, written to /dev/null), for the all-in cost.
SERVED = os.environ.get("BENCH_SERVED") == "1"
# BENCH_DEFAULT_GC=1: engines keep CPython's default garbage collector thresholds instead
# of tuning them once started, as `serve` does (entrypoints/gc_tuning.py).
DEFAULT_GC = os.environ.get("BENCH_DEFAULT_GC") == "1"


def started_up() -> None:
    """What `serve` does once started: tune the garbage collector (unless DEFAULT_GC)."""
    if not DEFAULT_GC:
        tune_garbage_collector()


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
    observer: EngineObserver | None = None,
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
    started_up()
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
    observer = None
    if SERVED:  # as `serve` runs it: Prometheus metrics, a JSON log line per run
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (the process's whole life)
        configure_logging("INFO", "json")
        observer = PrometheusObserver()
    out.put(asyncio.run(run_replica(url, name, executor, window, stop_at, observer)))


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
