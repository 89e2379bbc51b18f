"""CPU cost of the HTTP executor per call, alone and under concurrency (issue 4, "Speed").

A minimal asyncio HTTP/1.1 keep-alive target (bench/targets.py) runs in a process of its
own (so it never competes with the executor for the GIL) and answers every request 200
at once. The
executor under test (`HttpExecutor`, default settings) runs `--calls` calls at each
concurrency (default 1, 10, 30, 100), each worker calling `execute` in a loop, after a
warm-up. One figure per line, `name value`: calls per second and the process's CPU
milliseconds per call.

    python bench/http_executor.py [--calls 3000] [--concurrency 1,10,30,100]
        [--host 127.0.0.1] [--close] [--body 2] [--bare | --no-bare] [--profile FILE]

`--host localhost` calls through a host name (DNS and the outbound guard), `--close`
makes the target close every connection after its answer (a new connection per call),
`--body` sets the size of each answer's body (the executor keeps only an excerpt),
each concurrency measures the executor, then the same calls made by bare clients in the
same run: a plain `httpx.AsyncClient`, and a raw asyncio protocol that writes a fixed
request and waits for the answer's end (the floor: the event loop and the sockets).
`--bare` measures only the bare clients, `--no-bare` only the executor, `--profile`
writes a cProfile of the executor at the highest concurrency to FILE.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import targets  # bench/targets.py

from adapters.http import HttpExecutor
from domain.runs import Run, RunStatus
from domain.tasks import Task


def figure(name: str, value: float | int) -> None:
    text = f"{value:.4f}" if isinstance(value, float) else str(value)
    print(f"{name} {text}", flush=True)


# -- the caller -----------------------------------------------------------------------


def make_task(url: str) -> Task:
    now = datetime.now(UTC)
    return Task.model_validate(
        {
            "id": uuid.uuid4(),
            "name": "bench",
            "trigger": {"kind": "interval", "every": 60},
            "target": {"url": url, "body": {"bench": True}, "timeout_seconds": 10},
            "created_at": now,
            "updated_at": now,
            "next_fire_at": now,
            "next_run_at": now,
        }
    )


def make_run(task: Task) -> Run:
    now = datetime.now(UTC)
    return Run(
        id=uuid.uuid4(),
        task_id=task.id,
        scheduled_for=now,
        claimed_at=now,
        status=RunStatus.RUNNING,
        replica="bench:1",
    )


async def measure(
    url: str, calls: int, concurrency: int, bare: bool, profile: cProfile.Profile | None
) -> tuple[float, float, int]:
    """(seconds, CPU seconds, failures) of `calls` calls with `concurrency` in flight."""
    task = make_task(url)
    runs = [make_run(task) for _ in range(calls)]
    failures = 0
    executor = HttpExecutor()
    client = httpx.AsyncClient(limits=httpx.Limits(max_connections=200))

    async def one(run: Run) -> None:
        nonlocal failures
        if bare:
            response = await client.post(url, json={"bench": True})
            failures += response.status_code != 200
        else:
            outcome = await executor.execute(task, run, None)
            failures += outcome.status is not RunStatus.SUCCEEDED

    async def worker(mine: list[Run]) -> None:
        for run in mine:
            await one(run)

    async def round_(which: list[Run]) -> None:
        await asyncio.gather(*(worker(which[i::concurrency]) for i in range(concurrency)))

    await round_([make_run(task) for _ in range(max(concurrency * 5, 200))])  # warm up
    failures = 0
    if profile is not None:
        profile.enable()
    cpu, wall = time.process_time(), time.perf_counter()
    await round_(runs)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if profile is not None:
        profile.disable()
    await executor.close()
    await client.aclose()
    return wall, cpu, failures


class _RawClient(asyncio.Protocol):
    """The floor: one kept-alive connection, a fixed request written at once and the
    answer's end found by its Content-Length; no parsing, no pool, no checks."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        at = self.buffer.lower().find(b"content-length:")
        length = int(self.buffer[at + 15 :].split(b"\r\n", 1)[0])
        if len(self.buffer) >= end + 4 + length and self.waiter is not None:
            self.buffer = self.buffer[end + 4 + length :]
            self.waiter.set_result(None)

    async def post(self, request: bytes) -> None:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        await self.waiter


async def measure_raw(port: int, calls: int, concurrency: int) -> tuple[float, float, int]:
    """The same calls, each worker on a connection of its own, with `_RawClient`."""
    loop = asyncio.get_running_loop()
    body = b'{"bench":true}'
    request = (
        b"POST /hook HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: %d\r\n"
        b"Content-Type: application/json\r\n\r\n%s" % (port, len(body), body)
    )
    clients = [
        (await loop.create_connection(_RawClient, "127.0.0.1", port))[1] for _ in range(concurrency)
    ]

    async def worker(client: _RawClient, count: int) -> None:
        for _ in range(count):
            await client.post(request)

    async def round_(count: int) -> None:
        share = [count // concurrency + (i < count % concurrency) for i in range(concurrency)]
        await asyncio.gather(*(worker(c, n) for c, n in zip(clients, share, strict=True)))

    await round_(max(concurrency * 5, 200))
    cpu, wall = time.process_time(), time.perf_counter()
    await round_(calls)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    for client in clients:
        assert client.transport is not None
        client.transport.close()
    return wall, cpu, 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--concurrency", default="1,10,30,100")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--close", action="store_true")
    parser.add_argument("--body", type=int, default=2, help="bytes in each answer's body")
    parser.add_argument("--bare", action="store_true", help="only the bare clients")
    parser.add_argument("--no-bare", action="store_true", help="only the executor")
    parser.add_argument("--profile")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    body = b"ok" if args.body == 2 else b"x" * args.body
    process, port = targets.start(targets.Fixed(body=body, close=args.close))
    url = f"http://{args.host}:{port}/hook"
    print(f"load_average_start {os.getloadavg()[0]:.2f}", flush=True)
    try:
        for level in levels:
            profile = cProfile.Profile() if args.profile and level == levels[-1] else None
            per_call = {}
            for label in ("executor", "bare_httpx", "bare_raw"):
                if (label == "executor" and args.bare) or (label != "executor" and args.no_bare):
                    continue
                if label == "bare_raw":
                    if args.close:
                        continue
                    wall, cpu, failures = asyncio.run(measure_raw(port, args.calls, level))
                else:
                    bare = label == "bare_httpx"
                    which = profile if not bare else None
                    wall, cpu, failures = asyncio.run(measure(url, args.calls, level, bare, which))
                per_call[label] = 1000 * cpu / args.calls
                figure(f"{label}_c{level}_calls_per_second", args.calls / wall)
                figure(f"{label}_c{level}_cpu_ms_per_call", per_call[label])
                if failures:
                    figure(f"{label}_c{level}_failures", failures)
            if "executor" in per_call and len(per_call) > 1:
                # The executor's CPU per call beside the bare clients' in this same run.
                shown = "  ".join(f"{name} {ms:.3f}" for name, ms in per_call.items())
                print(f"# c{level} cpu_ms_per_call: {shown}", flush=True)
            if profile is not None:
                profile.dump_stats(args.profile)
    finally:
        process.terminate()
        process.join()
    print(f"load_average_end {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
