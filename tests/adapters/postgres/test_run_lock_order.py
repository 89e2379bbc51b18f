"""Leases and queued runs are locked in one order by every transaction that changes
several (docs/storage.md, "Lock order"). Leases go in run-id order: an outcome batch,
the sweep of lost runs, a task's deletion (whose cascade would otherwise take them in
the order it scans them) and a backfill's cancel (which before locked the backfill's
runs in id order, while a batch locks the runs it ends in the order of its plan).
Before, an outcome batch finishing runs of a task and `DELETE /tasks/{id}` of that task,
or of a backfill and its cancel, could each hold a row the other wanted: PostgreSQL
broke the cycle after a second, and the delete or cancel answered 503 or the engine
recorded the outcomes again.

Each test lets a third transaction hold one row, so that the two meet there: the first
to have waited for it goes on and wants the rows the other may have taken."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest

from adapters.postgres import PostgresTaskStore
from adapters.postgres.advisory import lease_lock_key
from application.ports import TaskDelete
from domain.backfills import Backfill
from domain.errors import TaskNotFound
from domain.runs import Run, RunOutcome, RunStatus
from domain.tasks import Task
from domain.triggers import IntervalTrigger
from tests.adapters.postgres.support import T0, query, waiting
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually

pytestmark = pytest.mark.postgres

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


@pytest.mark.parametrize("held", [0, 1, 2])
@pytest.mark.parametrize("batch_order", ["claimed", "reversed"])
@pytest.mark.parametrize("queued", [0, 2])
async def test_an_outcome_batch_and_the_delete_of_its_task_never_deadlock(
    postgres_backend: PostgresBackend, held: int, batch_order: str, queued: int
) -> None:
    """Three runs of one task in flight, ended in one batch (in the order they were
    claimed, or the reverse) while the task is deleted, with or without queued runs
    that the batch would start: whichever lease a third transaction holds, both land."""
    engine, api = await postgres_backend.new_store(), await postgres_backend.new_store()
    task, runs, _ = await runs_in_flight(postgres_backend, engine, 3, queued)
    batch = runs if batch_order == "claimed" else runs[::-1]

    finish, delete = await meet_at_lease(
        postgres_backend,
        runs[held].id,
        lambda: engine.finish_runs_starting([succeeded(run) for run in batch], T0 + STEP, "r:1"),
        lambda: api.delete_task(task.id),
    )

    assert (finish, delete) == (None, None)
    with pytest.raises(TaskNotFound):
        await api.get_task(task.id)
    ended = {run.id: (await api.get_run(run.id)).status for run in runs}
    assert set(ended.values()) == {RunStatus.SUCCEEDED}


@pytest.mark.parametrize("held", [0, 1, 2])
@pytest.mark.parametrize("deleter", ["delete", "apply"])
async def test_the_delete_of_a_task_and_an_outcome_batch_never_deadlock(
    postgres_backend: PostgresBackend, held: int, deleter: str
) -> None:
    """The same two transactions, the delete (by `DELETE /tasks/{id}` or by an apply)
    waiting first."""
    engine, api = await postgres_backend.new_store(), await postgres_backend.new_store()
    task, runs, _ = await runs_in_flight(postgres_backend, engine, 3)
    gone = [TaskDelete(task.id, task.version)]

    delete, finish = await meet_at_lease(
        postgres_backend,
        runs[held].id,
        (
            (lambda: api.delete_task(task.id))
            if deleter == "delete"
            else (lambda: api.apply_tasks([], [], gone, at=T0 + STEP))
        ),
        lambda: engine.finish_runs([succeeded(run) for run in runs[::-1]]),
    )

    assert (delete, finish) == (None, None)
    with pytest.raises(TaskNotFound):
        await api.get_task(task.id)


@pytest.mark.parametrize("held", [0, 1, 2])
async def test_the_sweep_of_lost_runs_and_the_delete_of_their_task_never_deadlock(
    postgres_backend: PostgresBackend, held: int
) -> None:
    """The sweep that fails runs whose leases expired deletes their leases as an
    outcome batch does."""
    engine, api = await postgres_backend.new_store(), await postgres_backend.new_store()
    task, runs, _ = await runs_in_flight(postgres_backend, engine, 3)

    sweep, delete = await meet_at_lease(
        postgres_backend,
        runs[held].id,
        lambda: engine.expire_lost_runs(T0 + timedelta(days=1)),
        lambda: api.delete_task(task.id),
    )

    assert (sweep, delete) == (None, None)
    ended = {run.id: (await api.get_run(run.id)).status for run in runs}
    assert set(ended.values()) == {RunStatus.FAILED}


@pytest.mark.parametrize("held", [0, 1, 2])
async def test_an_outcome_batch_starting_queued_runs_and_a_pause_never_deadlock(
    postgres_backend: PostgresBackend, held: int
) -> None:
    """The batch that starts queued runs in the slots it frees and the pause that
    cancels them take the queued runs in one order, the queue's (time, then id): no
    change was needed here, and this keeps it so."""
    engine, api = await postgres_backend.new_store(), await postgres_backend.new_store()
    task, runs, queued = await runs_in_flight(postgres_backend, engine, 3, queued=3)

    finish, pause = await meet_at_run(
        postgres_backend,
        queued[held].id,
        lambda: engine.finish_runs_starting([succeeded(run) for run in runs], T0 + STEP, "r:1"),
        lambda: api.update_task(
            task.model_copy(update={"enabled": False, "updated_at": T0 + STEP}),
            task.version,
            reschedule=True,
        ),
    )

    assert (finish, pause) == (None, None)
    statuses = [(await api.get_run(run.id)).status for run in queued]
    assert RunStatus.QUEUED not in statuses


@pytest.mark.parametrize(
    ("batch_order", "held"),
    # The sweep changes no queued run: it never meets the cancel at one.
    [(order, held) for order in ("made", "reversed") for held in range(5)]
    + [("sweep", held) for held in range(3)],
)
async def test_an_outcome_batch_and_the_cancel_of_its_backfill_never_deadlock(
    postgres_backend: PostgresBackend, batch_order: str, held: int
) -> None:
    """Three runs of a backfill in flight and two queued behind them, ended in one
    batch that would start the queued ones (or failed by the sweep, their leases
    expired), while the backfill is cancelled (which cancels the queued runs and asks
    those running to stop): whichever run a third transaction holds, both land."""
    engine, api = await postgres_backend.new_store(), await postgres_backend.new_store()
    task = await engine.create_task(
        make_task(IntervalTrigger(every=10, anchor=T0), max_running_instances=3, due=None)
    )
    now = T0 + 100 * STEP
    occurrences = [T0 + i * STEP for i in range(5)]
    made = await engine.backfills.backfill(
        task.id, uuid4(), occurrences, "buffer_all", False, now, "r:1", False
    )
    runs = [claimed.run for claimed in made.made]
    running = [run for run in runs if run.status is RunStatus.RUNNING]
    assert len(running) == 3
    batch = running if batch_order == "made" else running[::-1]

    finish, cancel = await meet_at_run(
        postgres_backend,
        runs[held].id,
        (
            (lambda: engine.expire_lost_runs(now + timedelta(days=1)))
            if batch_order == "sweep"
            else (
                lambda: engine.finish_runs_starting([succeeded(run) for run in batch], now, "r:1")
            )
        ),
        lambda: api.backfills.cancel_backfill(made.backfill_id, now),
    )

    assert (finish, cancel) == (None, None)


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


async def waiting_for_advisory(backend: PostgresBackend) -> bool:
    rows = await query(
        backend.url,
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        backend.schema,
    )
    return bool(rows[0][0] >= 1)


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
