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

from datetime import timedelta
from uuid import uuid4

import pytest

from application.ports import TaskDelete
from domain.errors import TaskNotFound
from domain.runs import RunStatus
from domain.triggers import IntervalTrigger
from tests.adapters.postgres.lock_order_support import (
    STEP,
    meet_at_lease,
    meet_at_run,
    runs_in_flight,
    succeeded,
)
from tests.adapters.postgres.support import T0
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task

pytestmark = pytest.mark.postgres


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
