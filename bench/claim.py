"""Claim and record throughput of the PostgreSQL store.

Fills a schema of its own with N due tasks (an hourly interval, all due at once, each
with a target URL of its own), then,
for 1 and 3 concurrent claimers and batch sizes 1, 10, 100 and 500, claims every task
once through `PostgresTaskStore.claim_due` (the full path: select and lock, the claim
rule, lease locks and counts, task updates, run and lease rows) and prints the
occurrences claimed per second and the claimers' CPU per occurrence, one line per
setting; beside it, in the same run, two limits of this machine: "all in SQL", the same
writes (lock, lease locks and counts, advance, run and lease rows, the runs returned)
made by one statement per batch with every value computed by PostgreSQL, no Python per
occurrence (the claim path's floor), and the raw claim (the bare `FOR UPDATE SKIP
LOCKED` statement that advances the tasks, no runs). Each claimer is a process of its
own with its own pool, as replicas are, and each setting is measured with one claim
under way per claimer and with two, each on a connection of its own (`--in-flight`),
as a replica's claim pass keeps them through a backlog (application/claim_pass.py); the
floor and the raw claim are measured the same way.

Then, for 1 and 3 concurrent writers and batch sizes 1, 10 and 100, it records an outcome
(succeeded) for every run through `PostgresTaskStore.finish_runs` (the run, its lease,
the task's failure count) and prints the outcomes recorded per second (at batch 1, on
the first 2,000 runs only). The schema is dropped at the end.

`--rounds R` measures instead one long-lived claimer (one connection, as a replica
keeps): it claims every task R times at the first `--batch`, the schema reset and
analyzed between rounds (as autovacuum analyzes a lease table that a quiet spell left
empty), and prints each round's rate; a plan the connection cached from an empty
table's statistics shows in the rounds after the first.

    python bench/claim.py [--tasks N] [--url URL] [--only claims|outcomes]
        [--batch B ...] [--claimers C ...] [--in-flight N ...] [--rounds R] [--default-gc]

Each claimer tunes its garbage collector once warmed up, as `imbi-scheduler serve` does
(entrypoints/gc_tuning.py); `--default-gc` keeps CPython's defaults, for comparison.

The URL comes from --url, else SCHEDULER_DATABASE_URL, else the local server's `test`
database.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
import time
import uuid
from datetime import timedelta
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.postgres import PostgresTaskStore, create_pool
from application.claim_pass import CLAIMS_IN_FLIGHT
from bench.claim_limits import floor_claim_all, raw_claim_all
from bench.claim_schema import NOW, T0, again, drop, prepare
from domain.runs import RunOutcome, RunStatus
from entrypoints.gc_tuning import tune_garbage_collector

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
CLAIMERS = (1, 3)
BATCHES = (1, 10, 100, 500)
WRITERS = (1, 3)
FINISH_BATCHES = (1, 10, 100)
# Claims under way at once per claimer: one after another, and as a replica's claim pass
# keeps them once a claim came back full (application/claim_pass.py).
IN_FLIGHT = (1, CLAIMS_IN_FLIGHT)


async def claim_all(
    url: str,
    schema: str,
    batch: int,
    replica: str,
    start: Barrier,
    default_gc: bool,
    in_flight: int,
) -> tuple[int, float]:
    """How many occurrences this claimer claimed, and the CPU seconds it spent on them,
    with `in_flight` claims under way at once (each on a connection of its own)."""
    pool = create_pool(url, min_size=in_flight, max_size=in_flight)
    await pool.open(wait=True)
    try:
        store = PostgresTaskStore(pool, schema)
        await store.claim_due(T0 - timedelta(days=1), batch, replica)  # warm up: none due
        if not default_gc:
            tune_garbage_collector()  # as `imbi-scheduler serve` does once started
        start.wait()
        claimed = 0

        async def claim_until_none_due() -> None:
            nonlocal claimed
            while found := await store.claim_due(NOW, batch, replica):
                claimed += len(found)

        cpu = time.process_time()
        await asyncio.gather(*(claim_until_none_due() for _ in range(in_flight)))
        return claimed, time.process_time() - cpu
    finally:
        await pool.close()


def claimer(
    url: str,
    schema: str,
    batch: int,
    replica: str,
    start: Barrier,
    out: Queue[tuple[int, float, float]],
    default_gc: bool,
    in_flight: int,
) -> None:
    if replica.startswith("raw"):
        claimed, cpu = asyncio.run(raw_claim_all(url, schema, NOW, batch, start, in_flight))
    elif replica.startswith("floor"):
        claimed, cpu = asyncio.run(
            floor_claim_all(url, schema, NOW, batch, replica, start, in_flight)
        )
    else:
        claimed, cpu = asyncio.run(
            claim_all(url, schema, batch, replica, start, default_gc, in_flight)
        )
    out.put((claimed, time.perf_counter(), cpu))


def measure(
    url: str,
    schema: str,
    claimers: int,
    batch: int,
    count: int,
    *,
    kind: str = "bench",
    default_gc: bool = False,
    in_flight: int = 1,
) -> tuple[float, float]:
    """Occurrences per second from the moment every claimer is ready to the last one's
    end, and the claimers' CPU seconds per occurrence (the Python side of the claim path,
    which a loaded machine disturbs less than the rate)."""
    start = mp.Barrier(claimers + 1)
    out: Queue[tuple[int, float, float]] = mp.Queue()
    procs = [
        mp.Process(
            target=claimer,
            args=(url, schema, batch, f"{kind}:{i}", start, out, default_gc, in_flight),
        )
        for i in range(claimers)
    ]
    for proc in procs:
        proc.start()
    start.wait()
    began = time.perf_counter()
    results = [out.get() for _ in procs]
    for proc in procs:
        proc.join()
    claimed = sum(n for n, _, _ in results)
    if claimed != count:
        raise SystemExit(f"claimed {claimed} occurrences of {count}")
    rate = float(count / (max(end for _, end, _ in results) - began))
    return rate, sum(cpu for _, _, cpu in results) / count


async def running_runs(url: str, schema: str, limit: int) -> list[uuid.UUID]:
    """Claim every task (in batches of 500), and return up to `limit` running runs."""
    await reset_and_claim(url, schema)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            sql.SQL("SELECT id FROM {}.runs WHERE status = 'running' LIMIT %s").format(
                sql.Identifier(schema)
            ),
            [limit],
        )
        return [row[0] for row in await cur.fetchall()]


async def reset_and_claim(url: str, schema: str) -> None:
    await again(url, schema)
    pool = create_pool(url, min_size=1, max_size=1)
    await pool.open(wait=True)
    try:
        store = PostgresTaskStore(pool, schema)
        while await store.claim_due(NOW, 500, "bench:claim"):
            pass
    finally:
        await pool.close()


async def finish_all(
    url: str, schema: str, run_ids: list[uuid.UUID], batch: int, start: Barrier
) -> int:
    pool = create_pool(url, min_size=1, max_size=1)
    await pool.open(wait=True)
    try:
        store = PostgresTaskStore(pool, schema)
        await store.finish_runs([])  # nothing to do, but the pool is warm
        outcome = RunOutcome(status=RunStatus.SUCCEEDED, attempts=1, finished_at=NOW)
        start.wait()
        recorded = 0
        for i in range(0, len(run_ids), batch):
            recorded += len(await store.finish_runs([(r, outcome) for r in run_ids[i : i + batch]]))
        return recorded
    finally:
        await pool.close()


def writer(
    url: str,
    schema: str,
    run_ids: list[uuid.UUID],
    batch: int,
    start: Barrier,
    out: Queue[tuple[int, float]],
) -> None:
    recorded = asyncio.run(finish_all(url, schema, run_ids, batch, start))
    out.put((recorded, time.perf_counter()))


def measure_finish(url: str, schema: str, writers: int, batch: int, count: int) -> float:
    """Outcomes recorded per second, every writer with its own share of the runs."""
    run_ids = asyncio.run(running_runs(url, schema, 2000 if batch == 1 else count))
    start = mp.Barrier(writers + 1)
    out: Queue[tuple[int, float]] = mp.Queue()
    shares = [run_ids[i::writers] for i in range(writers)]
    procs = [
        mp.Process(target=writer, args=(url, schema, share, batch, start, out)) for share in shares
    ]
    for proc in procs:
        proc.start()
    start.wait()
    began = time.perf_counter()
    results = [out.get() for _ in procs]
    for proc in procs:
        proc.join()
    recorded = sum(n for n, _ in results)
    if recorded != len(run_ids):
        raise SystemExit(f"recorded {recorded} outcomes of {len(run_ids)}")
    return float(recorded / (max(end for _, end in results) - began))


async def claim_rounds(
    url: str, schema: str, batch: int, count: int, rounds: int, default_gc: bool
) -> None:
    """`--rounds`: one claimer and its one connection through `rounds` rounds."""
    pool = create_pool(url, min_size=1, max_size=1)
    await pool.open(wait=True)
    try:
        store = PostgresTaskStore(pool, schema)
        if not default_gc:
            tune_garbage_collector()
        for number in range(1, rounds + 1):
            await again(url, schema)
            claimed = 0
            cpu, began = time.process_time(), time.perf_counter()
            while found := await store.claim_due(NOW, batch, "bench"):
                claimed += len(found)
            cpu, took = time.process_time() - cpu, time.perf_counter() - began
            if claimed != count:
                raise SystemExit(f"claimed {claimed} occurrences of {count}")
            print(
                f"round {number} batch={batch}: {count / took:,.0f} occurrences/s,"
                f" client CPU {cpu / count * 1e6:,.0f} us/occurrence",
                flush=True,
            )
    finally:
        await pool.close()


def measure_claims(
    args: argparse.Namespace, schema: str, claimers: int, batch: int, in_flight: int
) -> str:
    """One line of figures: the claim path, then its floor and the raw claim, each with
    the same claimers and claims under way."""
    figures = []
    for kind in ("bench", "floor", "raw"):
        asyncio.run(again(args.url, schema))
        figures.append(
            measure(
                args.url,
                schema,
                claimers,
                batch,
                args.tasks,
                kind=kind,
                default_gc=args.default_gc,
                in_flight=in_flight,
            )
        )
    (rate, cpu), (floor, _), (raw, _) = figures
    return (
        f"{rate:,.0f} occurrences/s, client CPU {cpu * 1e6:,.0f} us/occurrence;"
        f" all in SQL {floor:,.0f}/s; raw claim {raw:,.0f} rows/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--url", default=os.environ.get("SCHEDULER_DATABASE_URL", DEFAULT_URL))
    parser.add_argument(
        "--only", choices=("claims", "outcomes"), help="measure one of the two paths"
    )
    parser.add_argument(
        "--batch", type=int, action="append", help="claim batch sizes (default: 1 10 100 500)"
    )
    parser.add_argument(
        "--claimers", type=int, action="append", help="concurrent claimers (default: 1 3)"
    )
    parser.add_argument(
        "--in-flight",
        type=int,
        action="append",
        help="claims under way at once per claimer (default: 1, and the claim pass's 2)",
    )
    parser.add_argument(
        "--rounds", type=int, help="one long-lived claimer, this many rounds (see above)"
    )
    parser.add_argument(
        "--default-gc",
        action="store_true",
        help="keep CPython's default garbage collector thresholds (serve tunes them)",
    )
    args = parser.parse_args()
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    asyncio.run(prepare(args.url, schema, args.tasks))
    try:
        if args.rounds:
            batch = (args.batch or [500])[0]
            asyncio.run(
                claim_rounds(args.url, schema, batch, args.tasks, args.rounds, args.default_gc)
            )
            return
        for claimers in (args.claimers or CLAIMERS) if args.only != "outcomes" else ():
            for batch in args.batch or BATCHES:
                for in_flight in args.in_flight or IN_FLIGHT:
                    line = measure_claims(args, schema, claimers, batch, in_flight)
                    print(f"claimers={claimers} batch={batch} in flight={in_flight}: {line}")
        for writers in WRITERS if args.only != "claims" else ():
            for batch in FINISH_BATCHES:
                rate = measure_finish(args.url, schema, writers, batch, args.tasks)
                print(f"writers={writers} batch={batch}: {rate:,.0f} outcomes/s", flush=True)
    finally:
        asyncio.run(drop(args.url, schema))


if __name__ == "__main__":
    main()
