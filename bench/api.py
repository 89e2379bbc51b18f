"""Latency of API answers on one kept-alive connection (issue 9, the 44 ms stall).

Starts a real `imbi-scheduler serve` (in-memory store, or with `--store postgres` a
PostgreSQL schema of its own, dropped at the end; engine off, anonymous on 127.0.0.1) in
a subprocess, creates one task, then sends `--requests` sequential requests
on a single kept-alive httpx connection to each of `GET /healthz` and `GET /tasks/{id}`,
after a warm-up. One figure per line, `name value`: p50, p99 and mean wall milliseconds
per request, and the server's CPU milliseconds per request.

    python bench/api.py [--requests 500] [--store memory|postgres]

`--url URL` measures a server that is already running instead (no CPU figure then).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import psycopg
from psycopg import sql

from adapters.postgres import initialize
from tests.entrypoints.live import LiveServer

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"

WARM_UP = 20


def figure(name: str, value: float | int) -> None:
    text = f"{value:.3f}" if isinstance(value, float) else str(value)
    print(f"{name} {text}", flush=True)


def server_cpu(pid: int | None) -> float:
    """CPU seconds the server process has used so far (Linux /proc), 0 when unknown."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(client: httpx.Client, path: str, requests: int, pid: int | None) -> None:
    for _ in range(WARM_UP):
        client.get(path).raise_for_status()
    walls: list[float] = []
    cpu_before = server_cpu(pid)
    for _ in range(requests):
        start = time.perf_counter()
        client.get(path).raise_for_status()
        walls.append((time.perf_counter() - start) * 1000)
    cpu = (server_cpu(pid) - cpu_before) * 1000 / requests
    name = path.split("/")[1] if path.count("/") == 1 else "task"
    quantiles = statistics.quantiles(walls, n=100)
    figure(f"{name}_p50_ms", quantiles[49])
    figure(f"{name}_p99_ms", quantiles[98])
    figure(f"{name}_mean_ms", statistics.fmean(walls))
    if pid is not None:
        figure(f"{name}_server_cpu_ms", cpu)


def run(url: str, requests: int, pid: int | None) -> None:
    with httpx.Client(base_url=url, timeout=10) as client:
        created = client.post(
            "/tasks",
            json={
                "name": "bench-api",
                "trigger": {"kind": "interval", "every": 3600},
                "target": {"url": "http://127.0.0.1:9/", "method": "GET"},
            },
        )
        created.raise_for_status()
        figure("requests", requests)
        measure(client, "/healthz", requests, pid)
        measure(client, f"/tasks/{created.json()['id']}", requests, pid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--url", help="a running server instead of a fresh one")
    parser.add_argument("--store", choices=("memory", "postgres"), default="memory")
    parser.add_argument(
        "--database-url", default=os.environ.get("SCHEDULER_DATABASE_URL", DEFAULT_URL)
    )
    args = parser.parse_args()
    if args.url:
        run(args.url, args.requests, None)
        return
    environ = {"SCHEDULER_LOG_LEVEL": "WARNING"}
    schema = f"bench_api_{uuid.uuid4().hex[:8]}"
    if args.store == "postgres":
        asyncio.run(initialize(args.database_url, schema))
        environ |= {"SCHEDULER_DATABASE_URL": args.database_url, "SCHEDULER_SCHEMA": schema}
    try:
        with LiveServer(environ, ["--no-engine"]) as server:
            assert server.process is not None
            run(server.url, args.requests, server.process.pid)
    finally:
        if args.store == "postgres":
            with psycopg.connect(args.database_url, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )


if __name__ == "__main__":
    main()
