"""What one fire costs the PostgreSQL primary: transactions, rows written and WAL bytes.

Fills a schema of its own with N due tasks (bench/claim.py's fill: an hourly interval,
each task with a target of its own), then runs R rounds of a whole fire through the
store's real statements: claim every task (`claim_due`, batch B), and record a success
for every run it made (`finish_runs`, batch B), as an engine does. Around the rounds
it reads the server's counters and prints, per fire:

- transactions: the store's own (one claim and one outcome transaction per batch) and
  the database's commits (`pg_stat_database.xact_commit`, which counts every session);
- rows inserted, updated (of which HOT) and deleted in the schema's tables
  (`pg_stat_user_tables`: these count only this schema);
- WAL: bytes, records and full-page images (`pg_stat_wal`, cluster-wide), once right
  after a CHECKPOINT (every first touch of a page after a checkpoint writes its whole
  page) and once in the rounds that follow it (the steady state between checkpoints).

`pg_stat_wal` and `xact_commit` count whatever else the cluster does meanwhile: run it on
a cluster of its own for clean figures (docs/scaling.md says how). The schema is dropped
at the end.

    python bench/wal.py [--tasks N] [--rounds R] [--batch B] [--url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.postgres import PostgresTaskStore, create_pool, initialize
from bench.claim import DEFAULT_URL
from bench.claim_schema import NOW, again, drop, fill
from domain.runs import RunOutcome, RunStatus

_COUNTERS = """
SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),
       (SELECT coalesce(sum(n_tup_ins), 0) FROM pg_stat_user_tables WHERE schemaname = %(s)s),
       (SELECT coalesce(sum(n_tup_upd), 0) FROM pg_stat_user_tables WHERE schemaname = %(s)s),
       (SELECT coalesce(sum(n_tup_hot_upd), 0) FROM pg_stat_user_tables
        WHERE schemaname = %(s)s),
       (SELECT coalesce(sum(n_tup_del), 0) FROM pg_stat_user_tables WHERE schemaname = %(s)s),
       wal_bytes, wal_records, wal_fpi
FROM pg_stat_wal
"""
_NAMES = ("commits", "inserted", "updated", "hot_updated", "deleted", "wal_bytes",
          "wal_records", "wal_fpi")  # fmt: skip


async def counters(conn: psycopg.AsyncConnection[Any], schema: str) -> dict[str, float]:
    """The server's counters, once every session has flushed its statistics (they are
    flushed at most once a second, and at once when a session goes idle)."""
    await asyncio.sleep(1.5)
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    cur = await conn.execute(_COUNTERS, {"s": schema})
    row = await cur.fetchone()
    assert row is not None
    return {name: float(value) for name, value in zip(_NAMES, row, strict=True)}


async def fire_round(store: PostgresTaskStore, now: Any, batch: int) -> tuple[int, int]:
    """Claim every due task and record a success for each run: (fires, transactions)."""
    run_ids = []
    transactions = 0
    while claimed := await store.claim_due(now, batch, "bench:wal"):
        transactions += 1
        run_ids += [c.run.id for c in claimed if c.run.status is RunStatus.RUNNING]
    transactions += 1  # the last claim, which found nothing
    outcome = RunOutcome(status=RunStatus.SUCCEEDED, attempts=1, http_status=200, finished_at=now)
    for i in range(0, len(run_ids), batch):
        await store.finish_runs([(run_id, outcome) for run_id in run_ids[i : i + batch]])
        transactions += 1
    return len(run_ids), transactions


async def measure(url: str, schema: str, rounds: int, batch: int) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        # Round 0 makes the rows every later round updates; it is not measured.
        now = NOW
        await fires(url, schema, [now], batch)
        for label, checkpoint in (("after_checkpoint", True), ("steady", False)):
            if checkpoint:
                await conn.execute("CHECKPOINT")
            before = await counters(conn, schema)
            began = time.perf_counter()
            instants = [now + timedelta(hours=i) for i in range(1, rounds + 1)]
            now = instants[-1]  # the hourly tasks are all due again at each
            fired, transactions = await fires(url, schema, instants, batch)
            took = time.perf_counter() - began
            after = await counters(conn, schema)
            delta = {name: after[name] - before[name] for name in _NAMES}
            print(f"{label} fires {fired} in {took:.2f} s (batch {batch})")
            print(f"{label} store_transactions_per_fire {transactions / fired:.3f}")
            for name in _NAMES:
                print(f"{label} {name}_per_fire {delta[name] / fired:.2f}")


async def fires(url: str, schema: str, instants: list[Any], batch: int) -> tuple[int, int]:
    """A round at each instant on a pool of its own, closed before returning: a session
    that ends flushes its statistics (an idle one may hold them for seconds)."""
    pool = create_pool(url, min_size=1, max_size=1)
    await pool.open(wait=True)
    try:
        store = PostgresTaskStore(pool, schema)
        fired = transactions = 0
        for now in instants:
            n, t = await fire_round(store, now, batch)
            fired, transactions = fired + n, transactions + t
        return fired, transactions
    finally:
        await pool.close()


async def run(url: str, tasks: int, rounds: int, batch: int) -> None:
    schema = f"bench_wal_{uuid.uuid4().hex[:8]}"
    await initialize(url, schema)
    print(f"load_average_start {os.getloadavg()[0]:.2f}")
    try:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await fill(conn, schema, tasks)
        await again(url, schema)  # every task due at T0, nothing run
        await measure(url, schema, rounds, batch)
    finally:
        print(f"load_average_end {os.getloadavg()[0]:.2f}")
        await drop(url, schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--url", default=os.environ.get("SCHEDULER_DATABASE_URL", DEFAULT_URL))
    args = parser.parse_args()
    asyncio.run(run(args.url, args.tasks, args.rounds, args.batch))


if __name__ == "__main__":
    main()
