"""The soak (issue 15): replicas under faults, invariants checked from outside afterwards.

Starts `--replicas` real `imbi-scheduler serve` processes on one PostgreSQL schema of
its own, reaching the database through a TCP proxy of its own (bench/soak_proxy.py),
with a recording HTTP target (bench/soak_target.py) and many tasks at second-level
cadence: intervals and every-second crons, targets that answer, fail (retried), are
slow, hang past their timeout or close the connection, one-at-a-time and overlapping
(`max_running_instances` 3) tasks, `catch_up: "all"`, a short misfire grace. An API
client (bench/soak_load.py) creates, changes, pauses, fires and cancels tasks meanwhile.

Faults, on a plan printed at the start (seeded, so a run can be repeated): SIGKILL a
replica and start it again; SIGSTOP a replica for longer than its runs' leases, then
SIGCONT it (the zombie rule); drop every database connection at the proxy; terminate
the replicas' backends (`pg_terminate_backend`); blackhole the proxy for a while; and,
with `--restart-postgres` only, restart the PostgreSQL cluster (needs root).

At the end it checks the invariants of bench/soak_checks.py, prints figures, and exits
1 when one is broken. docs/reliability.md explains both.

    python bench/soak.py [--duration 60] [--replicas 3] [--seed 15] [--scale 1]
                         [--restart-postgres [--pg-cluster 15/soak]] [--url URL]

`--duration` up to 90 s runs the fixed short plan (the test suite's, tests/system/
test_soak.py); a longer one draws faults at random intervals from the seed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import soak_checks
from bench.soak_fleet import Replica, once_specs, restart_postgres, task_specs
from bench.soak_load import ApiLoad
from bench.soak_plan import PAUSE, plan
from bench.soak_proxy import FaultyProxy
from bench.soak_target import SoakTarget

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
WAKE_AFTER_LEASE = 2.0  # a paused replica wakes this long after its last lease expired
BLACKHOLE = 5.0  # seconds the proxy swallows everything
SWEEP_SLACK = 20.0  # the lost-run sweep runs every 15 s
RUNNING_BY_REPLICA = "SELECT replica, count(*) FROM {s}.runs WHERE status = 'running' GROUP BY 1"
# Runs still running whose lease expired before the given instant: not swept yet.
UNSWEPT_LEASES = (
    "SELECT count(*) FROM {s}.runs WHERE status = 'running' AND lease_expires_at < to_timestamp(%s)"
)
SWEEP_PATIENCE = 60.0  # how much longer than the slack a late sweep is waited for
ORPHANED_LEASES = (
    "SELECT max(lease_expires_at) FROM {s}.runs"
    " WHERE status = 'running' AND replica = %s AND claimed_at <= to_timestamp(%s)"
)
LATEST_LEASE = (
    "SELECT max(lease_expires_at) FROM {s}.runs WHERE status = 'running' AND replica = %s"
)


@dataclass
class Options:
    url: str = DEFAULT_URL
    duration: float = 60.0
    replicas: int = 3
    seed: int = 15
    scale: int = 1
    restart_postgres: bool = False
    pg_cluster: str = ""  # the cluster --restart-postgres restarts ("15/soak"; "" = main)
    keep: bool = False  # leave the schema for a look afterwards


@dataclass
class Report:
    broken: dict[str, list[str]]
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.broken.values())

    def text(self) -> str:
        lines = [f"{key}: {json.dumps(value, default=str)}" for key, value in self.figures.items()]
        for name, evidence in self.broken.items():
            lines.append(f"{'BROKEN' if evidence else 'held  '} {name}")
            lines.extend(f"    {line}" for line in evidence[:10])
        return "\n".join(lines)


class Soak:
    def __init__(self, options: Options) -> None:
        self.o = options
        self.schema = f"soak_{uuid.uuid4().hex[:10]}"
        upstream = conninfo_to_dict(options.url)
        self.proxy = FaultyProxy(
            str(upstream.get("host") or "127.0.0.1"), int(upstream.get("port") or 5432)
        )
        self.target = SoakTarget()
        self.replicas: list[Replica] = []
        self.faults: list[tuple[float, str, str]] = []  # (at, kind, what)
        self._fault_times: list[tuple[float, str]] = []  # (time.time(), kind)
        # (replica, until): its runs claimed up to `until` (wall clock) a kill or a pause
        # orphaned; a paused replica's claims commit when it wakes, claimed before it slept.
        self.orphaned: list[tuple[str, float]] = []
        self._resume: list[tuple[float, Replica]] = []
        self._restarts: list[threading.Thread] = []

    def run(self) -> Report:
        self.proxy.start()
        self.target.start()
        via_proxy = make_conninfo(self.o.url, host="127.0.0.1", port=str(self.proxy.port))
        environ = {
            "SCHEDULER_DATABASE_URL": via_proxy, "SCHEDULER_SCHEMA": self.schema,
            "SCHEDULER_MAX_POLL_INTERVAL": "1", "SCHEDULER_LOG_LEVEL": "WARNING",
            "SCHEDULER_POOL_SIZE": "4", "SCHEDULER_TARGET_ALLOW": "127.0.0.1",
            "SCHEDULER_DRAIN_TIMEOUT": "10",
        }  # fmt: skip
        load = ApiLoad(self._up_urls, self.target.url(""), self.o.seed)
        began = time.monotonic()
        try:
            self.replicas = [Replica(f"replica-{k}", environ) for k in range(self.o.replicas)]
            self.replicas[0].restart()  # the first makes the schema; the others start beside
            with ThreadPoolExecutor(len(self.replicas)) as pool:
                list(pool.map(Replica.restart, self.replicas[1:]))
            phases = {"fleet": time.monotonic()}
            self._create(task_specs(self.target, self.o.scale))
            self._create(once_specs(self.target, self.o.scale))
            the_plan = plan(self.o.duration, self.o.seed, restart=self.o.restart_postgres)
            print(f"soak: schema {self.schema}, seed {self.o.seed}, plan {the_plan}", flush=True)
            phases["start"] = time.monotonic()
            load.start()
            try:
                self._inject(the_plan)
            finally:
                load.stop()
            phases["faults"] = time.monotonic()
            checked_at = self._wait_for_sweep()
            phases["sweep"] = time.monotonic()
            stops = self._stop_all()
            phases["stop"] = time.monotonic()
            report = self._report(load, checked_at, stops)
            report.figures["seconds"] = {
                name: round(at - began, 1) for name, at in phases.items()
            }  # since the soak began, at the end of each phase
        finally:
            for replica in self.replicas:
                if replica.paused:
                    replica.signal(signal.SIGCONT)
                replica.server.stop(signal.SIGKILL)
                for server in replica.servers:
                    server.__exit__(None, None, None)  # its log file goes
            self.target.stop()
            self.proxy.stop()
            if not self.o.keep:
                with psycopg.connect(self.o.url, autocommit=True) as conn:
                    conn.execute(self._sql("DROP SCHEMA IF EXISTS {s} CASCADE"))
        return report

    def _create(self, specs: list[dict[str, Any]]) -> None:
        """Create the tasks in one apply (POST /tasks/apply: one transaction)."""
        url = self.replicas[0].server.url
        response = httpx.post(f"{url}/tasks/apply", json={"tasks": specs}, timeout=120)
        assert response.status_code == 200, response.text
        assert len(response.json()["created"]) == len(specs), response.text

    def _sql(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(s=sql.Identifier(self.schema))

    # -- faults ------------------------------------------------------------------------

    def _up_urls(self) -> list[str]:
        return [r.server.url for r in self.replicas if not (r.down or r.paused)]

    def _inject(self, the_plan: list[tuple[float, str]]) -> None:
        start = time.monotonic()
        pending = list(the_plan)
        rng = random.Random(self.o.seed)
        while True:
            now = time.monotonic() - start
            for replica in self.replicas:
                replica.sample()
            for at, replica in list(self._resume):
                if now >= at:
                    self._resume.remove((at, replica))
                    replica.signal(signal.SIGCONT)
                    replica.paused = False
                    self.orphaned.append((replica.name, time.time()))
                    self.faults.append((round(now, 1), "resume", replica.name))
            if pending and now >= pending[0][0]:
                _, kind = pending.pop(0)
                self._fault(kind, rng, now)
                continue
            if now >= self.o.duration and not self._resume:
                return
            time.sleep(0.2)

    def _fault(self, kind: str, rng: random.Random, now: float) -> None:
        healthy = [r for r in self.replicas if not (r.down or r.paused)]
        what = ""
        if kind in ("kill", "pause"):
            if len(healthy) < 2:
                kind = "cut"  # keep one replica working: the plan's next best fault
            else:
                victim = self._busiest(healthy[1:] if kind == "pause" else healthy, rng)
                what = victim.name
                if kind == "kill":
                    victim.kill()
                    self.orphaned.append((victim.name, time.time()))
                    # Started again beside the plan: a start takes seconds on a loaded machine.
                    restart = threading.Thread(target=victim.restart, daemon=True)
                    restart.start()
                    self._restarts.append(restart)
                else:
                    victim.signal(signal.SIGSTOP)
                    victim.paused = True
                    self._resume.append((now + self._pause_for(victim), victim))
        if kind in ("cut", "blackhole", "terminate", "restart_postgres"):
            # A commit whose answer the fault lost leaves its claim's runs running,
            # unknown to their replica, until their lease expires and a sweep ends
            # them "replica lost" (docs/reliability.md): those are waited for too.
            lost_until = time.time() + (BLACKHOLE if kind == "blackhole" else 1.0)
            self.orphaned.extend((r.name, lost_until) for r in self.replicas if not r.down)
        if kind == "cut":
            what = f"{self.proxy.cut()} connections"
        elif kind == "blackhole":
            what = f"{BLACKHOLE:.0f} s, {self.proxy.blackhole(BLACKHOLE)} connections"
        elif kind == "terminate":
            what = f"{self._terminate()} backends"
        elif kind == "restart_postgres":
            restart_postgres(self.o.pg_cluster, self.proxy.upstream[1])
        self.faults.append((round(now, 1), kind, what))
        self._fault_times.append((time.time(), kind))
        print(f"soak: {now:6.1f} s {kind} {what}", flush=True)

    def _busiest(self, candidates: list[Replica], rng: random.Random) -> Replica:
        """The candidate with the most runs in flight (a pause or kill that orphans
        nothing proves little); a draw among equals."""
        counts = self._running_by_replica()
        rng.shuffle(candidates)
        return max(candidates, key=lambda r: counts.get(r.name, 0))

    def _running_by_replica(self) -> dict[str, int]:
        with psycopg.connect(self.o.url, autocommit=True) as conn:
            rows = conn.execute(self._sql(RUNNING_BY_REPLICA)).fetchall()
        return {name: int(n) for name, n in rows}

    def _pause_for(self, victim: Replica) -> float:
        """Seconds to keep `victim` stopped: until just after the last lease of its runs
        in flight, so it wakes (most likely) before a sweep has marked them lost and
        must itself leave them alone; PAUSE when it has none."""
        with psycopg.connect(self.o.url, autocommit=True) as conn:
            row = conn.execute(self._sql(LATEST_LEASE), [victim.name]).fetchone()
        if row is None or row[0] is None:
            return PAUSE
        latest: datetime = row[0]
        return max(5.0, latest.timestamp() - time.time() + WAKE_AFTER_LEASE)

    def _terminate(self) -> int:
        ports = sorted(self.proxy.upstream_ports())
        with psycopg.connect(self.o.url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE client_port = ANY(%s) AND pid <> pg_backend_pid()",
                [ports],
            ).fetchall()
        return sum(1 for (done,) in rows if done)

    # -- the end -----------------------------------------------------------------------

    def _wait_for_sweep(self) -> float:
        """Wait until every lease a kill or a pause orphaned has expired and a sweep has
        passed since; the instant up to which expired leases must have been swept."""
        latest = 0.0
        with psycopg.connect(self.o.url, autocommit=True) as conn:
            for replica, until in self.orphaned:
                row = conn.execute(
                    self._sql(ORPHANED_LEASES),
                    [replica, until + 1],
                ).fetchone()
                if row and row[0] is not None:
                    latest = max(latest, row[0].timestamp())
        while time.time() < latest + 1:
            time.sleep(0.5)
        # Then until a sweep has ended them (one runs every 15 s); a loaded machine may
        # delay it, so wait (bounded) until the leases expired by then are swept: only a
        # sweep that never comes breaks the invariant, not a late one.
        swept_by = latest + 1
        with psycopg.connect(self.o.url, autocommit=True) as conn:
            deadline = time.monotonic() + SWEEP_SLACK + SWEEP_PATIENCE
            while time.monotonic() < deadline:
                (unswept,) = conn.execute(self._sql(UNSWEPT_LEASES), [swept_by]).fetchone() or (0,)
                if not unswept:
                    break
                time.sleep(0.5)
        return swept_by

    def _stop_all(self) -> dict[str, int]:
        for restart in self._restarts:
            restart.join(60)
        with ThreadPoolExecutor(len(self.replicas)) as pool:  # each drains for a while
            codes = pool.map(lambda r: r.server.stop(signal.SIGTERM), self.replicas)
            return {r.name: code for r, code in zip(self.replicas, codes, strict=True)}

    def _report(self, load: ApiLoad, checked_at: float, stops: dict[str, int]) -> Report:
        with psycopg.connect(self.o.url, autocommit=True, row_factory=dict_row) as conn:
            tasks = {t["id"]: t for t in conn.execute(self._sql("SELECT * FROM {s}.tasks"))}
            runs = conn.execute(self._sql("SELECT * FROM {s}.runs")).fetchall()
            written = conn.execute(
                self._sql("SELECT count(*) AS n FROM {s}.tasks WHERE name = ANY(%s)"),
                [load.unavailable_creates],
            ).fetchone()
        evidence = soak_checks.Evidence(
            tasks, runs, self.target.recorded(), load.answers,
            datetime.fromtimestamp(checked_at, UTC), self.target.recorded_events(),
        )  # fmt: skip
        broken = soak_checks.check(evidence)
        broken["clean_stop"] = [
            f"{r.name} exited {stops[r.name]}; its log ends: {r.server.log()[-1500:]}"
            for r in self.replicas
            if stops[r.name] != 0
        ]
        figures = soak_checks.figures(evidence)
        kinds: dict[str, int] = {}
        for _, kind, _ in self.faults:
            kinds[kind] = kinds.get(kind, 0) + 1
        answers: dict[str, dict[str, int]] = {}
        for (kind, outcome), n in sorted(load.answers.items()):
            answers.setdefault(kind, {})[outcome] = n
        figures |= {
            "faults": kinds, "fault_log": self.faults, "api_answers": answers,
            "api_503": sum(n for (_, outcome), n in load.answers.items() if outcome == "503"),
            "creates_503_written": int(written["n"]) if written else 0,
            "api_503_after": self._blame(load.unavailable_at),
            "rss_mb_first_max": {r.name: (round(r.rss_kb[0] / 1024), round(max(r.rss_kb) / 1024))
                                 for r in self.replicas if r.rss_kb},
            "load_average": os.getloadavg(),
        }  # fmt: skip
        return Report(broken, figures)

    def _blame(self, unavailable: list[tuple[float, str]]) -> dict[str, dict[str, int]]:
        """The 503s by the fault that came last before each (within 10 s; "none" past
        that) and by request kind: a 503 after a termination or a restart, not a cut,
        would be a request failed by a pooled connection that died idle."""
        blamed: dict[str, dict[str, int]] = {}
        for at, kind in unavailable:
            before = [f for t, f in self._fault_times if at - 10 <= t <= at]
            fault = before[-1] if before else "none"
            blamed.setdefault(fault, {})[kind] = blamed.setdefault(fault, {}).get(kind, 0) + 1
        return blamed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("SCHEDULER_DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--scale", type=int, default=1, help="copies of the task mix")
    parser.add_argument("--restart-postgres", action="store_true")
    parser.add_argument(
        "--pg-cluster", default="", help="VERSION/NAME of the cluster to restart (default: main)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the schema")
    args = parser.parse_args()
    options = Options(args.url, args.duration, args.replicas, args.seed, args.scale,
                      args.restart_postgres, args.pg_cluster, args.keep)  # fmt: skip
    report = Soak(options).run()
    print(report.text())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
