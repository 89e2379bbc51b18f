"""Task creates through the API: `--clients` concurrent clients, single `POST /tasks`.

Starts a real `imbi-scheduler serve --no-engine` (anonymous on 127.0.0.1) on a
PostgreSQL schema of its own (or, with `--store memory`, the in-memory store), then
`--clients` clients, each on one kept-alive connection, create `--creates` tasks between
them (a cron trigger and a target each, every name new). The clients speak HTTP/1.1 on
raw sockets with prepared request bytes, so that their own CPU stays small beside the
server's on a shared machine. One figure per line, `name value`: creates per second,
p50 and p99 wall milliseconds per create, the server's CPU milliseconds per create, the
clients' CPU, and the load average before and after. The schema is dropped at the end.

    python bench/creates.py [--creates 10000] [--clients 16] [--store postgres|memory]

The PostgreSQL URL comes from --url, else SCHEDULER_DATABASE_URL, else the local
server's `test` database. The goal (issue 14): 1,500 creates/s on PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.postgres import initialize
from bench.api import DEFAULT_URL, figure, server_cpu
from tests.entrypoints.live import LiveServer

WARM_UP = 50


def request(port: int, prefix: str, i: int) -> bytes:
    body = json.dumps(
        {
            "name": f"{prefix}-{i}",
            "trigger": {"kind": "cron", "expression": f"{i % 60} * * * *"},
            "target": {"url": f"http://127.0.0.1:9/hook/{i}"},
            "tags": ["bench"],
        }
    ).encode()
    head = (
        f"POST /tasks HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def client(port: int, requests: list[bytes], walls: list[float]) -> None:
    """Send `requests` one after the other on one connection; each must answer 201."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for raw in requests:
            start = time.perf_counter()
            writer.write(raw)
            head = await reader.readuntil(b"\r\n\r\n")
            status = head[9:12]
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            answer = await reader.readexactly(length)
            if status != b"201":
                raise AssertionError(f"{status.decode()} {answer.decode(errors='replace')}")
            walls.append((time.perf_counter() - start) * 1000)
    finally:
        writer.close()


async def round_of(port: int, prefix: str, count: int, clients: int) -> list[float]:
    raws = [request(port, prefix, i) for i in range(count)]
    walls: list[float] = []
    await asyncio.gather(*(client(port, raws[k::clients], walls) for k in range(clients)))
    return walls


async def measure(port: int, pid: int, count: int, clients: int) -> None:
    await round_of(port, "warm", WARM_UP, clients)
    figure("load_average_before", os.getloadavg()[0])
    cpu_before, own_before = server_cpu(pid), time.process_time()
    start = time.perf_counter()
    walls = await round_of(port, "bench", count, clients)
    elapsed = time.perf_counter() - start
    server = (server_cpu(pid) - cpu_before) * 1000 / count
    own = (time.process_time() - own_before) * 1000 / count
    quantiles = statistics.quantiles(walls, n=100)
    figure("creates", count)
    figure("clients", clients)
    figure("seconds", elapsed)
    figure("creates_per_s", count / elapsed)
    figure("create_p50_ms", quantiles[49])
    figure("create_p99_ms", quantiles[98])
    figure("server_cpu_ms_per_create", server)
    figure("client_cpu_ms_per_create", own)
    figure("load_average_after", os.getloadavg()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--creates", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--store", choices=("postgres", "memory"), default="postgres")
    parser.add_argument("--url", default=os.environ.get("SCHEDULER_DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--log-level", default="WARNING", help="SCHEDULER_LOG_LEVEL")
    args = parser.parse_args()
    environ = {"SCHEDULER_LOG_LEVEL": args.log_level}
    schema = f"bench_creates_{uuid.uuid4().hex[:8]}"
    if args.store == "postgres":
        asyncio.run(initialize(args.url, schema))
        environ |= {"SCHEDULER_DATABASE_URL": args.url, "SCHEDULER_SCHEMA": schema}
    figure("store_postgres", int(args.store == "postgres"))
    try:
        with LiveServer(environ, ["--no-engine"]) as server:
            assert server.process is not None
            asyncio.run(measure(server.port, server.process.pid, args.creates, args.clients))
    finally:
        if args.store == "postgres":
            with psycopg.connect(args.url, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )


if __name__ == "__main__":
    main()
