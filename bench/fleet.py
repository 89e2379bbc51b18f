"""Replicas as processes against one PostgreSQL, watched from outside (issue 14's rows on
bursts across replicas and idle fleets).

Scenarios, in a database of its own (bench/engine_harness.py: the local keep-alive
target, the task fill, the replica process), each replica a process of its own whose
resident memory is sampled every second from /proc:

- burst: N tasks (10,000; 100,000 with --burst 100000) due at one instant, R replicas
  (1 and 3): seconds until the target has received every occurrence, lateness p50/p99,
  deliveries, duplicates by Idempotency-Key, and each replica's memory at the start,
  its peak and at the end (flat: the end near the start);
- idle: N tasks (1,000,000 with --idle 1000000) due a week ahead, one replica for
  --seconds: its CPU seconds over the window and its memory.

One figure per line, `name value`.

    python bench/fleet.py [--url URL] [--scenario burst,idle] [--burst 10000]
        [--replicas 1 --replicas 3] [--idle 100000] [--seconds 30]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.engine_harness import (
    DEFAULT_URL,
    bench_database,
    count_finished,
    figure,
    fill,
    fresh_schema,
    replica_process,
    start_target,
)


def rss_mb(pid: int) -> float:
    """A process's resident memory (VmRSS), in MB; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return 0.0


def cpu_seconds(pid: int) -> float:
    """A process's CPU seconds so far (user and system, from /proc); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Fleet:
    """R replica processes, their memory sampled every second; stopped (terminated, as
    a killed replica would be: nothing here depends on a clean stop) on leaving."""

    def __init__(self, url: str, replicas: int, lifetime: float):
        context = mp.get_context("spawn")
        end = time.time() + lifetime
        self._out = context.Queue()  # kept: each child unpickles it when it starts
        self._processes = [
            context.Process(
                target=replica_process,
                args=(url, f"fleet-{i}", True, (end, end), end, self._out),
            )
            for i in range(replicas)
        ]
        self.memory: list[list[float]] = [[] for _ in self._processes]
        self._done = threading.Event()

    def __enter__(self) -> Fleet:
        for process in self._processes:
            process.start()
        threading.Thread(target=self._sample, daemon=True).start()
        return self

    def _sample(self) -> None:
        while not self._done.wait(1.0):
            for i, process in enumerate(self._processes):
                if process.pid is not None and (mb := rss_mb(process.pid)):
                    self.memory[i].append(mb)

    def rss(self) -> list[float]:
        """Each replica's resident memory now, in MB."""
        return [rss_mb(p.pid) if p.pid is not None else 0.0 for p in self._processes]

    def cpu(self) -> float:
        """The replicas' CPU seconds so far, added up."""
        return sum(cpu_seconds(p.pid) for p in self._processes if p.pid is not None)

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        for process in self._processes:
            process.terminate()
            process.join()


def memory_figures(label: str, start: list[float], fleet: Fleet) -> None:
    """Each replica's memory when the measured part began (started and settled), its
    peak over the whole run, and at the end."""
    for i, (before, samples) in enumerate(zip(start, fleet.memory, strict=True)):
        figure(f"{label}_replica{i}_rss_start_mb", round(before, 1))
        figure(f"{label}_replica{i}_rss_peak_mb", round(max(samples, default=0.0), 1))
        figure(f"{label}_replica{i}_rss_end_mb", round(fleet.rss()[i], 1))


def burst(url: str, count: int, replicas: int, target: Any, limit: float) -> None:
    label = f"fleet_burst_{replicas}"
    fresh_schema(url)
    target.reset()
    # Time for the fill and for every replica process to start and settle first.
    due = datetime.fromtimestamp(int(time.time()) + 15 + count // 20_000, UTC)
    fill(url, count, 3600, due, target.url("/hook"))
    start = due.timestamp()
    with Fleet(url, replicas, start - time.time() + limit + 30) as fleet:
        time.sleep(max(0.0, start - time.time()))
        cpu, rss = fleet.cpu(), fleet.rss()
        while time.time() < start + limit and count_finished(url) < count:
            time.sleep(0.5)
        recorded = time.time() - start
        cpu = fleet.cpu() - cpu
        time.sleep(2.0)  # one more memory sample after the burst
        memory_figures(label, rss, fleet)
    stats = target.stats()
    figure(f"{label}_tasks", count)
    figure(f"{label}_all_fired_seconds", stats["last_received"] - start)
    figure(f"{label}_all_recorded_seconds", recorded)
    figure(f"{label}_lateness_p50_seconds", stats["lateness_p50"])
    figure(f"{label}_lateness_p99_seconds", stats["lateness_p99"])
    figure(f"{label}_deliveries", stats["requests"])
    figure(f"{label}_duplicates", stats["duplicates"])
    figure(f"{label}_cpu_seconds", cpu)


def idle(url: str, count: int, seconds: float, target: Any) -> None:
    fresh_schema(url)
    far = datetime.fromtimestamp(int(time.time()), UTC) + timedelta(days=7)
    fill(url, count, 3600, far, target.url("/hook"))
    with Fleet(url, 1, seconds + 60) as fleet:
        time.sleep(10.0)  # let the replica start and settle
        cpu, rss = fleet.cpu(), fleet.rss()
        time.sleep(seconds)
        cpu = fleet.cpu() - cpu
        memory_figures("fleet_idle", rss, fleet)
    figure("fleet_idle_tasks", count)
    figure("fleet_idle_cpu_seconds_per_30s", cpu * 30 / seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("SCHEDULER_DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--scenario", default="burst,idle")
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--replicas", type=int, action="append")
    parser.add_argument("--limit", type=float, default=120.0, help="seconds a burst may take")
    parser.add_argument("--idle", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    scenarios = set(args.scenario.split(","))
    figure("load_average_at_start", os.getloadavg()[0])
    with bench_database(args.url) as url, start_target() as target:
        if "burst" in scenarios:
            for replicas in args.replicas or (1, 3):
                burst(url, args.burst, replicas, target, args.limit)
        if "idle" in scenarios:
            idle(url, args.idle, args.seconds, target)
    figure("load_average_at_end", os.getloadavg()[0])


if __name__ == "__main__":
    main()
