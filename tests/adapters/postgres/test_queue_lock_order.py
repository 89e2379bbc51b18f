"""Queued runs are locked in the queue's order (time, then id) by every writer of
several, wherever their partitions are, and a claim or a backfill's cancel never waits on
a lease or a lock that a transaction waiting for it holds (docs/storage.md, "Lock order").
Each test lets a third transaction hold one row or lock, so that the two meet there."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import psycopg
import pytest

from adapters.postgres import PostgresTaskStore
from adapters.postgres.advisory import lease_lock_key
from domain.backfills import Backfill
from domain.runs import RunStatus
from domain.tasks import Task
from domain.triggers import IntervalTrigger
from tests.adapters.postgres.lock_order_support import (
    STEP,
    done_or_waiting,
    meet_at_lease,
    meet_at_run,
    succeeded,
    waiting_for_advisory,
)
from tests.adapters.postgres.support import T0, query
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually

pytestmark = pytest.mark.postgres


async def backfilled_task(store: PostgresTaskStore, overlap: str = "buffer_all") -> Task:
    """A task that fires no more by itself (its runs come from backfills), with three
    slots."""
    return await store.create_task(
        make_task(
            IntervalTrigger(every=10, anchor=T0),
            max_running_instances=3,
            overlap=overlap,
            due=None,
        )
    )


async def test_a_backfill_cancel_does_not_wait_for_its_task_lease_lock(
    postgres_backend: PostgresBackend,
) -> None:
    """A claim of a `replace` task holds the task's lease lock while it asks runs in
    flight to stop (it locks their leases): a cancel holding those leases and waiting for
    that lock made a cycle (an audit met it hundreds of times). The cancel takes no such
    lock."""
    store = await postgres_backend.new_store()
    task = await backfilled_task(store, overlap="replace")
    now = T0 + 100 * STEP
    made = await store.backfills.backfill(
        task.id, uuid4(), [T0 + i * STEP for i in range(3)], "allow_all", False, now, "r:1", False
    )
    key = lease_lock_key(postgres_backend.schema, task.id)
    async with await psycopg.AsyncConnection.connect(postgres_backend.url) as claim:
        await claim.execute("SELECT pg_advisory_xact_lock(%s)", [key])
        async with asyncio.timeout(10):
            stopped = await store.backfills.cancel_backfill(made.backfill_id, now)
    assert stopped == 3


async def test_a_backfill_and_the_delete_of_its_task_leave_no_queued_run(
    postgres_backend: PostgresBackend,
) -> None:
    """A backfill waits for its task's lease lock while the task is deleted: the delete
    waits for the backfill (which holds the task row), then cancels the runs it queued.
    Before, the delete went through at once and the backfill then wrote queued runs of a
    task that was gone, which nothing would ever start or end."""
    engine, api = await postgres_backend.new_store(), await postgres_backend.new_store()
    task = await backfilled_task(engine)
    now = T0 + 100 * STEP
    key = lease_lock_key(postgres_backend.schema, task.id)
    async with await psycopg.AsyncConnection.connect(postgres_backend.url) as claim:
        await claim.execute("SELECT pg_advisory_xact_lock(%s)", [key])
        backfilling = asyncio.create_task(
            engine.backfills.backfill(
                task.id,
                uuid4(),
                [T0 + i * STEP for i in range(6)],
                "buffer_all",
                False,
                now,
                "r:1",
                False,
            )
        )
        await eventually(lambda: waiting_for_advisory(postgres_backend), "the backfill to wait")
        deleting = asyncio.create_task(api.delete_task(task.id))
        # The backfill's wait names no table: only the delete's counts here.
        await eventually(
            lambda: done_or_waiting(deleting, postgres_backend, 1), "the delete to wait, or land"
        )
        await claim.rollback()
    made = await backfilling
    await deleting
    statuses = [(await api.get_run(c.run.id)).status for c in made.made]
    assert RunStatus.QUEUED not in statuses
    assert statuses.count(RunStatus.CANCELLED) == 3


async def test_a_replace_claim_and_an_outcome_batch_starting_its_queue_never_deadlock(
    postgres_backend: PostgresBackend,
) -> None:
    """A claim of a `replace` task holds the task's lease lock while it asks the run in
    flight to stop, which locks that run's lease; an outcome batch ending the same run
    holds its lease (it deletes it) and then wants the lease lock to start the runs a
    buffered backfill queued behind it. Met at the lease, they made a cycle (an audit
    counted nine in a storm; PostgreSQL broke each after a second). The claim now leaves
    a lease another transaction holds, without waiting: that run is ending (as here), or
    being asked to stop."""
    engine, api = await postgres_backend.new_store(), await postgres_backend.new_store()
    task = await engine.create_task(
        make_task(
            IntervalTrigger(every=10, anchor=T0),
            max_running_instances=1,
            overlap="replace",
            misfire_grace_seconds=None,
        )
    )
    [first] = await engine.claim_due(T0, 10, "r:1")
    assert first.run.status is RunStatus.RUNNING
    backfilled = await engine.backfills.backfill(
        task.id, uuid4(), [T0 - 3 * STEP, T0 - 2 * STEP], "buffer_all", False, T0, "r:1", False
    )
    assert [c.run.status for c in backfilled.made] == [RunStatus.QUEUED] * 2

    def finish() -> Coroutine[Any, Any, object]:
        return engine.finish_runs_starting([succeeded(first.run)], T0 + STEP, "r:1")

    def claim() -> Coroutine[Any, Any, object]:
        return api.claim_due(T0 + STEP, 10, "r:2")

    results = await meet_at_lease(postgres_backend, first.run.id, finish, claim)

    assert results == [None, None]
    assert (await api.get_run(first.run.id)).status is RunStatus.SUCCEEDED
    runs = await query(
        postgres_backend.url,
        "SELECT status, count(*) FROM {schema}.runs WHERE task_id = %s GROUP BY status",
        postgres_backend.schema,
        task.id,
    )
    # The backfill's first queued run took the slot; the claim's run waits behind the
    # other one.
    assert dict(runs) == {"succeeded": 1, "running": 1, "queued": 2}


async def across_partitions(
    backend: PostgresBackend, store: PostgresTaskStore, slots: int, old: int
) -> tuple[Task, Backfill, datetime]:
    """A `buffer_all` task with `slots` slots, and a backfill of `old` occurrences long
    ago and two of this week, made now: the old ones in `runs_default` (no week's
    partition is kept that far back), the others in this week's partition, whose scan
    comes first. The runs of the first `slots` occurrences run, the others wait."""
    task = await store.create_task(
        make_task(
            IntervalTrigger(every=10, anchor=T0), max_running_instances=slots, overlap="buffer_all"
        )
    )
    now = datetime.now(UTC).replace(microsecond=0)
    week = (now - timedelta(days=now.weekday())).replace(hour=0, minute=0, second=0)
    occurrences = [T0 + i * STEP for i in range(old)] + [week + STEP, week + 2 * STEP]
    made = await store.backfills.backfill(
        task.id, uuid4(), occurrences, "buffer_all", False, now, "r:1", False
    )
    statuses = [c.run.status for c in made.made]
    assert statuses == [RunStatus.RUNNING] * slots + [RunStatus.QUEUED] * (old + 2 - slots)
    places = await query(
        backend.url,
        "SELECT tableoid::regclass::text FROM {schema}.runs WHERE task_id = %s"
        " ORDER BY scheduled_for",
        backend.schema,
        task.id,
    )
    assert [place.endswith("runs_default") for (place,) in places] == [True] * old + [False] * 2
    return task, made, now


def pause(store: PostgresTaskStore, task: Task, now: datetime) -> Coroutine[Any, Any, object]:
    return store.update_task(
        task.model_copy(update={"enabled": False, "updated_at": now}),
        task.version,
        reschedule=True,
    )


async def test_a_pause_and_the_cancel_of_a_backfill_across_partitions_never_deadlock(
    postgres_backend: PostgresBackend,
) -> None:
    """A backfill's cancel locks its queue in time order; a pause (or a delete)
    cancelled it in the order it scanned the partitions, this week's first and the
    default last. A third transaction holds the newest queued run, so that the pause
    holds this week's other one and waits, the cancel takes the old one and waits for
    the pause's: both must land."""
    engine, api = await postgres_backend.new_store(), await postgres_backend.new_store()
    task, made, now = await across_partitions(postgres_backend, engine, slots=1, old=2)

    paused, cancel = await meet_at_run(
        postgres_backend,
        made.made[-1].run.id,
        lambda: pause(api, task, now),
        lambda: api.backfills.cancel_backfill(made.backfill_id, now),
    )

    assert (paused, cancel) == (None, None)
    left = [(await api.get_run(c.run.id)).status for c in made.made[1:]]
    assert left == [RunStatus.CANCELLED] * 3


@pytest.mark.parametrize("held", [0, 1, 2])
async def test_an_outcome_batch_starting_a_queue_across_partitions_and_a_pause_never_deadlock(
    postgres_backend: PostgresBackend, held: int
) -> None:
    """The batch that starts queued runs in the slots it frees locks them in the
    queue's order too, wherever they are: three runs in flight, the queue behind them
    one old run in `runs_default` and two of this week."""
    engine, api = await postgres_backend.new_store(), await postgres_backend.new_store()
    task, made, now = await across_partitions(postgres_backend, engine, slots=3, old=4)
    running, queued = [c.run for c in made.made[:3]], [c.run for c in made.made[3:]]

    finish, paused = await meet_at_run(
        postgres_backend,
        queued[held].id,
        lambda: engine.finish_runs_starting([succeeded(run) for run in running], now, "r:1"),
        lambda: pause(api, task, now),
    )

    assert (finish, paused) == (None, None)
    statuses = [(await api.get_run(run.id)).status for run in queued]
    assert RunStatus.QUEUED not in statuses
