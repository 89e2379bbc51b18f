"""Helpers of the lock-order tests (docs/storage.md, "Lock order"): a task with runs
in flight among a busy scheduler's leases, and two transactions made to meet at one row
that a third holds."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg

from adapters.postgres import PostgresTaskStore
from domain.runs import Run, RunOutcome, RunStatus
from domain.tasks import Task
from domain.triggers import IntervalTrigger
from tests.adapters.postgres.support import T0, query, waiting
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually

STEP = timedelta(seconds=10)


async def runs_in_flight(
    backend: PostgresBackend, store: PostgresTaskStore, count: int, queued: int = 0
) -> tuple[Task, list[Run], list[Run]]:
    """A task with `count` runs in flight (a lease each) and `queued` runs waiting
    behind them, claimed one step apart, among the leases of 2,000 other tasks
    (analyzed): the plans of a busy scheduler, where a batch finds its leases by their
    key in no particular order and a cascade by task."""
    task = await store.create_task(
        make_task(
            IntervalTrigger(every=10, anchor=T0),
            max_running_instances=count,
            misfire_grace_seconds=None,
            overlap="buffer_all" if queued else "skip",
        )
    )
    claimed = [
        (await store.claim_due(T0 + i * STEP, 10, "r:1"))[0].run for i in range(count + queued)
    ]
    runs, waiting_runs = claimed[:count], claimed[count:]
    assert all(run.status is RunStatus.RUNNING for run in runs)
    assert all(run.status is RunStatus.QUEUED for run in waiting_runs)
    schema = backend.schema
    async with await psycopg.AsyncConnection.connect(backend.url, autocommit=True) as conn:
        await conn.execute(
            f'INSERT INTO "{schema}".tasks SELECT (jsonb_populate_record(NULL::"{schema}".tasks,'
            " to_jsonb(t) || jsonb_build_object('id', gen_random_uuid(), 'name', 'other-' || i)"
            f')).* FROM "{schema}".tasks AS t, generate_series(1, 2000) AS i'
        )
        await conn.execute(
            f'INSERT INTO "{schema}".run_leases (run_id, task_id, expires_at, replica)'
            f" SELECT gen_random_uuid(), id, now() + interval '1 hour', 'r:2'"
            f' FROM "{schema}".tasks WHERE id <> %s',
            [task.id],
        )
        await conn.execute(f'ANALYZE "{schema}".tasks, "{schema}".run_leases')
    return task, runs, waiting_runs


async def meet_at_lease(
    backend: PostgresBackend,
    lease: UUID,
    first: Callable[[], Coroutine[Any, Any, object]],
    second: Callable[[], Coroutine[Any, Any, object]],
) -> list[BaseException | None]:
    """Hold `lease`, then meet there (`meet_at`)."""
    return await meet_at(backend, "run_leases", "run_id", lease, first, second)


async def meet_at_run(
    backend: PostgresBackend,
    run: UUID,
    first: Callable[[], Coroutine[Any, Any, object]],
    second: Callable[[], Coroutine[Any, Any, object]],
) -> list[BaseException | None]:
    """Hold the row of `run`, then meet there (`meet_at`)."""
    return await meet_at(backend, "runs", "id", run, first, second)


async def meet_at(
    backend: PostgresBackend,
    table: str,
    key: str,
    row: UUID,
    first: Callable[[], Coroutine[Any, Any, object]],
    second: Callable[[], Coroutine[Any, Any, object]],
) -> list[BaseException | None]:
    """Hold the row of `table` whose `key` is `row`, start `first` and wait for it to
    wait, start `second` and wait for both to wait (or for `second` to land without
    waiting), then let go; what each raised (None: it landed)."""
    async with await psycopg.AsyncConnection.connect(backend.url) as holder:
        await holder.execute(
            f'SELECT 1 FROM "{backend.schema}".{table} WHERE {key} = %s FOR UPDATE', [row]
        )
        one = asyncio.create_task(first())
        await eventually(lambda: waiting(backend), "the first to wait for the held lease")
        two = asyncio.create_task(second())
        await eventually(lambda: done_or_waiting(two, backend), "the second to wait, or to land")
        await holder.rollback()
    results = await asyncio.gather(one, two, return_exceptions=True)
    return [r if isinstance(r, BaseException) else None for r in results]


async def done_or_waiting(
    write: asyncio.Task[Any], backend: PostgresBackend, count: int = 2
) -> bool:
    return write.done() or await waiting(backend, count)


def succeeded(run: Run) -> tuple[UUID, RunOutcome]:
    return run.id, RunOutcome(status=RunStatus.SUCCEEDED, attempts=1, finished_at=T0 + STEP)


async def waiting_for_advisory(backend: PostgresBackend) -> bool:
    rows = await query(
        backend.url,
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        backend.schema,
    )
    return bool(rows[0][0] >= 1)
