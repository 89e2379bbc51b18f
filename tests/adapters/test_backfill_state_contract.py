"""The store contract for a backfill's record (docs/policies.md, "Backfill"), on every
store: what it was asked for, its status and its runs counted, also for a backfill that
made no runs, read after its task was deleted."""

from __future__ import annotations

from uuid import UUID, uuid4

import pytest

from application.ports import TaskStore
from domain.backfills import Backfill
from domain.errors import BackfillNotFound
from domain.runs import RunStatus
from domain.tasks import Task
from tests.adapters.contract_support import REPLICA, SECOND, succeeded
from tests.adapters.contract_support import store as store  # the fixture
from tests.adapters.test_backfill_contract import NOW, PAST, backfill, backfills
from tests.adapters.test_overlap_contract import add, claim_at


async def made_by(store: TaskStore, task: Task, *, actor: str | None = None) -> Backfill:
    span = (PAST[0] - SECOND, PAST[-1] + SECOND)
    return await backfills(store).backfill(
        task.id, uuid4(), PAST, "buffer_all", True, NOW, REPLICA, False, span=span, actor=actor
    )


async def drain(store: TaskStore, made: Backfill) -> None:
    """End every run of the backfill, one slot after the other."""
    running = made.made[0].run.id
    for seconds in range(1, len(made.made) + 1):
        at = NOW + seconds * SECOND
        freed = await store.finish_runs_starting([(running, succeeded(at))], at, REPLICA)
        if freed.started:
            running = freed.started[0].run.id


async def test_a_backfill_is_read_with_its_runs_counted(store: TaskStore) -> None:
    task = await add(store, "skip")
    made = await made_by(store, task, actor="ops")
    state = await backfills(store).get_backfill(made.backfill_id)
    record = state.record
    assert (record.id, record.task_id, record.task_name) == (made.backfill_id, task.id, task.name)
    assert (record.start, record.end) == (PAST[0] - SECOND, PAST[-1] + SECOND)
    assert (record.overlap, record.only_missing, record.actor) == ("buffer_all", True, "ops")
    assert (record.created_at, record.runs) == (NOW, 5)
    assert state.status == "active" and state.record.finished_at is None
    assert dict(state.counts) == {RunStatus.RUNNING: 1, RunStatus.QUEUED: 4}
    assert (state.pending, state.finished) == (5, 0)

    await drain(store, made)
    done = await backfills(store).get_backfill(made.backfill_id)
    assert done.status == "finished"
    assert dict(done.counts) == {RunStatus.SUCCEEDED: 5}
    assert (done.pending, done.finished) == (0, 5)


async def test_a_backfill_that_made_no_runs_is_read_and_cancelled(store: TaskStore) -> None:
    task = await add(store, "skip")
    made = await backfill(store, task, [])
    state = await backfills(store).get_backfill(made.backfill_id)
    assert (state.status, state.record.runs, dict(state.counts)) == ("finished", 0, {})
    assert state.record.finished_at == NOW
    assert await backfills(store).cancel_backfill(made.backfill_id, NOW + SECOND) == 0
    assert (await backfills(store).get_backfill(made.backfill_id)).status == "finished"


async def test_a_cancelled_backfill_says_so(store: TaskStore) -> None:
    task = await add(store, "skip")
    await claim_at(store, 99)
    made = await backfill(store, task)
    assert await backfills(store).cancel_backfill(made.backfill_id, NOW + SECOND) == 5
    state = await backfills(store).get_backfill(made.backfill_id)
    assert (state.status, state.record.finished_at) == ("cancelled", NOW + SECOND)
    assert dict(state.counts) == {RunStatus.CANCELLED: 5}
    # Cancelled again: nothing left to cancel, and it stays as it was.
    assert await backfills(store).cancel_backfill(made.backfill_id, NOW + 2 * SECOND) == 0
    again = await backfills(store).get_backfill(made.backfill_id)
    assert (again.status, again.record.finished_at) == ("cancelled", NOW + SECOND)


async def test_a_backfill_outlives_its_task(store: TaskStore) -> None:
    task = await add(store, "skip")
    await claim_at(store, 99)
    made = await backfill(store, task)
    await store.delete_task(task.id, at=NOW + SECOND)
    state = await backfills(store).get_backfill(made.backfill_id)
    assert (state.record.task_name, state.status) == (task.name, "finished")
    assert dict(state.counts) == {RunStatus.CANCELLED: 5}


async def test_unknown_and_dry_run_backfills_are_not_found(store: TaskStore) -> None:
    task = await add(store, "skip")
    dry = await backfill(store, task, dry_run=True)
    for backfill_id in (UUID(int=7), dry.backfill_id):
        with pytest.raises(BackfillNotFound):
            await backfills(store).get_backfill(backfill_id)
