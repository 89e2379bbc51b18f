"""How soon a change made through the API reaches the target (the wake-up path of
docs/architecture.md: every task write NOTIFYs, every replica LISTENs).

Starts `--replicas` real `imbi-scheduler serve` processes (2) on a PostgreSQL schema of
their own, dropped at the end, with every engine setting at its default: an engine that
missed a wake-up would find the change only at its next poll, up to
`SCHEDULER_MAX_POLL_INTERVAL` (5 s) later. The local target (bench/targets.py, a process
of its own) reports each call's arrival on `time.monotonic()`, the one system-wide
clock the bench reads too. Each of three changes that make a task due now is made
`--trials` times (50), the three in turn, each through the next replica's API (after a
warm-up of each through each replica, not counted):

- patch: a one-shot task due an hour ahead is created; a moment later a PATCH moves its
  `run_at` to the current second, so that it is due now;
- resume: a paused one-shot task is created with `run_at` at the current second; a
  moment later it is resumed, which makes it due at once (its `run_at` passed within
  its misfire grace);
- create: a one-shot task due at the current second is created.

Each figure is the seconds from the API's answer to the change (the PATCH, the resume,
the create) until the target received the call. Before every change the bench waits a
random 0.2 to 0.8 s, so that the engines are asleep, at any point of their poll, when it
comes. One figure per line, `name value`: per kind, p50, p90, p99 and max; `duplicates`
(calls beyond the first for one trial: must be 0); `lost` (trials whose call did not
arrive within `--timeout` s: must be 0); `other_replica` (trials whose run was made by
a replica other than the one whose API made the change: the wake-up went through
PostgreSQL); the load average at the start and at the end.

    python bench/wake.py [--url URL] [--replicas 2] [--trials 50] [--kinds patch,resume,create]
        [--timeout 30] [--seed 3]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import queue
import random
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import targets  # bench/targets.py

from adapters.postgres import initialize
from bench.engine_harness import DEFAULT_URL, figure, percentile
from tests.entrypoints.live import LiveServer

KINDS = ("patch", "resume", "create")
HOUR = 3600
READY_TIMEOUT = 60.0
SETTLE = 3.0  # seconds waited after the last trial for late duplicates


class Arrivals:
    """The target of bench/targets.py that answers 200 at once and puts each call's path,
    `Idempotency-Key` and arrival (`time.monotonic()`) on a queue the bench reads."""

    delay = 0.0
    close = False

    def __init__(self, out: Any) -> None:
        self.out = out  # a spawn context's Queue: it travels with the target to its process

    def answer(self, head: bytes) -> bytes:
        arrived = time.monotonic()
        lines = head.decode("latin-1").split("\r\n")
        key = ""
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "idempotency-key":
                key = value.strip()
        self.out.put((lines[0].split(" ")[1], key, arrived))
        return targets.response(200, b"ok")


class Received:
    """What the target reported so far, by path."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self.calls: dict[str, list[tuple[str, float]]] = {}

    def _take(self, timeout: float) -> bool:
        try:
            path, key, arrived = self._out.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return False
        self.calls.setdefault(path, []).append((key, arrived))
        return True

    def first(self, path: str, timeout: float) -> float | None:
        """When the first call to `path` arrived, waiting up to `timeout` s for it."""
        deadline = time.monotonic() + timeout
        while path not in self.calls:
            if not self._take(deadline - time.monotonic()) and time.monotonic() >= deadline:
                return None
        return self.calls[path][0][1]

    def drain(self, seconds: float) -> None:
        """Take what arrives over `seconds`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._take(deadline - time.monotonic())


def this_second() -> str:
    """The current second in UTC, naive (the trigger's timezone is UTC)."""
    return datetime.now(UTC).replace(microsecond=0, tzinfo=None).isoformat()


def in_an_hour() -> str:
    return datetime.fromtimestamp(int(time.time()) + HOUR, UTC).replace(tzinfo=None).isoformat()


def task(name: str, target_url: str, trigger: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "trigger": trigger, "target": {"url": target_url}, **extra}


def checked(response: httpx.Response, status: int) -> dict[str, Any]:
    if response.status_code != status:
        raise AssertionError(f"{response.request.method} {response.request.url}: {response.text}")
    answer: dict[str, Any] = response.json()
    return answer


class Trials:
    """Changes made through the replicas' APIs in turn, each timed until its call."""

    def __init__(self, apis: list[str], target_base: str, received: Received, seed: int) -> None:
        self.apis = apis
        self.target_base = target_base
        self.received = received
        self.random = random.Random(seed)
        self.client = httpx.Client(timeout=30)
        self.count = 0
        self.latency: dict[str, list[float]] = {kind: [] for kind in KINDS}
        self.lost: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.other_replica: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.paths: dict[str, list[str]] = {kind: [] for kind in KINDS}

    def pause(self) -> None:
        time.sleep(self.random.uniform(0.2, 0.8))

    def change(self, kind: str, api: str, name: str, url: str) -> httpx.Response:
        """The change that makes the task due now (its `run_at` read at this instant)."""
        if kind == "patch":
            return self.client.patch(
                f"{api}/tasks/{name}",
                json={"trigger": {"kind": "one_shot", "run_at": this_second()}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
        if kind == "resume":
            return self.client.post(f"{api}/tasks/{name}/resume")
        once = {"kind": "one_shot", "run_at": this_second()}
        return self.client.post(f"{api}/tasks", json=task(name, url, once))

    def trial(self, kind: str, timeout: float, counted: bool = True) -> None:
        api = self.apis[self.count % len(self.apis)]
        self.count += 1
        name = f"wake-{kind}-{self.count}"
        path = f"/wake/{name}"
        url = self.target_base + path
        if kind == "patch":
            once = {"kind": "one_shot", "run_at": in_an_hour()}
            checked(self.client.post(f"{api}/tasks", json=task(name, url, once)), 201)
        elif kind == "resume":
            now = {"kind": "one_shot", "run_at": this_second()}
            paused = task(name, url, now, enabled=False)
            checked(self.client.post(f"{api}/tasks", json=paused), 201)
        self.pause()
        answer = checked(self.change(kind, api, name, url), 201 if kind == "create" else 200)
        answered = time.monotonic()
        due = answer["next_run_at"]
        if due is None or datetime.fromisoformat(due.replace("Z", "+00:00")) > datetime.now(UTC):
            raise AssertionError(f"{name} is not due after the change: {answer}")
        arrived = self.received.first(path, timeout)
        if not counted:
            return
        self.paths[kind].append(path)
        if arrived is None:
            self.lost[kind] += 1
            return
        self.latency[kind].append(arrived - answered)
        runs = checked(self.client.get(f"{api}/tasks/{name}/runs"), 200)["items"]
        made_by = {run["replica"] for run in runs}
        if made_by and made_by != {api_replica(self.apis.index(api))}:
            self.other_replica[kind] += 1

    def close(self) -> None:
        self.client.close()


def api_replica(index: int) -> str:
    return f"wake-{index}"


def wait_ready(api: str) -> None:
    """Until the replica's `/readyz` says its engine is alive (it listens from its first
    pass on)."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{api}/readyz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{api} was not ready within {READY_TIMEOUT} s")


def report(trials: Trials, kinds: list[str]) -> None:
    for kind in kinds:
        seconds = trials.latency[kind]
        calls = {path: trials.received.calls.get(path, []) for path in trials.paths[kind]}
        figure(f"wake_{kind}_trials", len(trials.paths[kind]))
        figure(f"wake_{kind}_p50_seconds", percentile(seconds, 0.5))
        figure(f"wake_{kind}_p90_seconds", percentile(seconds, 0.9))
        figure(f"wake_{kind}_p99_seconds", percentile(seconds, 0.99))
        figure(f"wake_{kind}_max_seconds", max(seconds, default=float("nan")))
        figure(f"wake_{kind}_duplicates", sum(max(0, len(c) - 1) for c in calls.values()))
        figure(f"wake_{kind}_lost", trials.lost[kind])
        figure(f"wake_{kind}_other_replica", trials.other_replica[kind])
    keys = [key for calls in trials.received.calls.values() for key, _ in calls]
    figure("wake_duplicate_idempotency_keys", len(keys) - len(set(keys)))


def run(
    url: str, replicas: int, trial_count: int, kinds: list[str], timeout: float, seed: int
) -> None:
    schema = f"bench_wake_{uuid.uuid4().hex[:8]}"
    asyncio.run(initialize(url, schema))
    environ = {
        "SCHEDULER_DATABASE_URL": url,
        "SCHEDULER_SCHEMA": schema,
        "SCHEDULER_LOG_LEVEL": "WARNING",
    }
    out = mp.get_context("spawn").Queue()
    process, port = targets.start(Arrivals(out))
    servers = [
        LiveServer({**environ, "SCHEDULER_REPLICA": api_replica(k)}) for k in range(replicas)
    ]
    trials = Trials([s.url for s in servers], f"http://127.0.0.1:{port}", Received(out), seed)
    try:
        for server in servers:
            server.start()
        for server in servers:
            wait_ready(server.url)
        figure("replicas", replicas)
        for kind in kinds:  # warm-up: each kind through each replica, not counted
            for _ in servers:
                trials.trial(kind, timeout, counted=False)
        for _ in range(trial_count):
            for kind in kinds:
                trials.trial(kind, timeout)
        trials.received.drain(SETTLE)
        report(trials, kinds)
    finally:
        trials.close()
        for server in servers:
            server.__exit__(None, None, None)
        process.terminate()
        process.join()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("SCHEDULER_DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--trials", type=int, default=50, help="changes of each kind")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds a call may take")
    parser.add_argument("--seed", type=int, default=3, help="of the pauses before changes")
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    if unknown := set(kinds) - set(KINDS):
        parser.error(f"unknown kinds: {', '.join(sorted(unknown))}")
    figure("load_average_at_start", os.getloadavg()[0])
    run(args.url, args.replicas, args.trials, kinds, args.timeout, args.seed)
    figure("load_average_at_end", os.getloadavg()[0])


if __name__ == "__main__":
    main()
