"""Speed of events on PostgreSQL (issue 13, "Speed").

In a schema of its own (dropped at the end), N tasks whose occurrences are claimed past
their grace, so that each claim records a run `missed`:

- claim: the time and CPU seconds to claim all N (batches of 100) without `notify`,
  then with `notify` on every task (each claim also writes N outbox rows in its
  transaction);
- drain: the outbox of N events sent to a local receiver (bench/http_executor.py's
  keep-alive asyncio target, a separate process answering 200 at once, so it never
  competes with the sender for the GIL) by R senders (replicas, each with its own pool
  and HTTP executor), running as `serve` runs them (`EventSender.start`: claims overlap
  the attempts in flight), signed: events per second until all are sent and settled,
  and the senders' CPU seconds (this process's, the receiver's not included).

One figure per line, `name value`. The load average is printed at the start and the
end: other work on the machine moves every figure.

    python bench/events.py [--url URL] [-n 2000] [--replicas 1]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import targets  # bench/targets.py

from adapters.clock import SystemClock
from adapters.http import HttpExecutor, HttpExecutorSettings
from adapters.http.signing import Signer, parse_signing_secrets
from adapters.postgres import PostgresTaskStore, create_pool, initialize
from application.events import EventSender, NoEventObserver
from domain.claims import scheduled
from domain.events import EventStatus, Progress
from domain.tasks import HttpTarget, Notify, Task
from domain.triggers import IntervalTrigger

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
SECRET = "whsec_" + base64.b64encode(b"bench-events-signing-secret-32b!").decode()


def tasks(n: int, now: datetime, notify: Notify | None) -> list[Task]:
    anchor = now - timedelta(minutes=10)
    return [
        scheduled(
            Task(
                id=uuid.uuid4(),
                name=f"bench-{uuid.uuid4().hex[:12]}",
                trigger=IntervalTrigger(every=3600, anchor=anchor),
                target=HttpTarget(url="http://127.0.0.1:9/"),
                misfire_grace_seconds=1,
                notify=notify,
                created_at=anchor,
                updated_at=anchor,
            ),
            anchor,
        )
        for _ in range(n)
    ]


class Settled(NoEventObserver):
    """Counts the events sent; `done` is set once `expected` were (the drain's end,
    told by the senders themselves: no polling of the outbox beside them)."""

    def __init__(self, expected: int) -> None:
        self.expected, self.sent, self.done = expected, 0, asyncio.Event()

    def event_settled(self, event: Progress) -> None:
        if event.status is EventStatus.SENT:
            self.sent += 1
            if self.sent >= self.expected:
                self.done.set()


async def claim_all(store: PostgresTaskStore, now: datetime, label: str) -> None:
    started, cpu = time.perf_counter(), time.process_time()
    while await store.claim_due(now, 100, "bench"):
        pass
    print(f"claim_{label}_seconds {time.perf_counter() - started:.3f}")
    print(f"claim_{label}_cpu_seconds {time.process_time() - cpu:.3f}")


async def bench(url: str, n: int, replicas: int, receiver: str) -> None:
    schema = f"bench_events_{uuid.uuid4().hex[:8]}"
    await initialize(url, schema)
    pools = []
    try:
        pool = create_pool(url, max_size=4)
        await pool.open(wait=True)
        pools.append(pool)
        store = PostgresTaskStore(pool, schema)
        now = datetime.now(UTC)
        await store.apply_tasks(tasks(n, now, None), [], [], at=now)
        await claim_all(store, now, "without_notify")
        await store.apply_tasks(tasks(n, now, Notify(url=receiver)), [], [], at=now)
        await claim_all(store, now, "with_notify")
        pending = await store.outbox.count_events(EventStatus.PENDING)
        print(f"events_written {pending}")

        signer = Signer(parse_signing_secrets(SECRET))
        settled = Settled(pending)
        senders, executors = [], []
        for _ in range(replicas):
            replica_pool = create_pool(url, max_size=4)
            await replica_pool.open(wait=True)
            pools.append(replica_pool)
            executor = HttpExecutor(HttpExecutorSettings(signer=signer))
            executors.append(executor)
            outbox = PostgresTaskStore(replica_pool, schema).outbox
            senders.append(EventSender(outbox, executor, SystemClock(), observer=settled))
        started, cpu = time.perf_counter(), time.process_time()
        for sender in senders:
            await sender.start()
        await settled.done.wait()
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        for sender in senders:
            await sender.stop()
        sent = await store.outbox.count_events(EventStatus.SENT)
        print(f"drain_seconds {seconds:.3f}")
        print(f"events_sent {sent}")
        print(f"events_per_second {sent / seconds:.0f}")
        print(f"events_per_second_per_replica {sent / seconds / replicas:.0f}")
        # The senders' CPU (this process; the receiver runs in its own).
        print(f"drain_cpu_seconds {cpu:.3f}")
        print(f"drain_cpu_ms_per_event {1000 * cpu / max(sent, 1):.3f}")
        for executor in executors:
            await executor.close()
    finally:
        for pool in pools:
            await pool.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--url", default=os.environ.get("SCHEDULER_BENCH_DATABASE_URL", DEFAULT_URL)
    )
    parser.add_argument("-n", type=int, default=2000, help="events (and tasks)")
    parser.add_argument("--replicas", type=int, default=1, help="senders draining together")
    args = parser.parse_args()
    print(f"load_average_start {os.getloadavg()[0]:.2f}")
    server, port = targets.start(targets.Fixed())
    try:
        asyncio.run(bench(args.url, args.n, args.replicas, f"http://127.0.0.1:{port}/events"))
    finally:
        server.terminate()
        server.join()
    print(f"load_average_end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
