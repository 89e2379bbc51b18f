"""The TaskStore contract of cancel requests, lost runs and retention, on every store."""

from __future__ import annotations

from uuid import uuid4

import pytest

from application.ports import TaskStore
from domain.backfills import STOPPED_BY_BACKFILL
from domain.errors import (
    RunNotFound,
    RunNotRunning,
)
from domain.runs import REPLICA_LOST, RunOutcome, RunStatus
from tests.adapters.contract_support import MINUTE, REPLICA, SECOND, T0, claim_one, succeeded
from tests.adapters.contract_support import store as store  # the fixture
from tests.adapters.test_backfill_contract import NOW, PAST, backfill, backfills
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import make_task


async def test_cancel_requests(store: TaskStore) -> None:
    await store.create_task(make_task())
    await store.create_task(make_task())
    first, second = [c.run for c in await store.claim_due(T0, 10, REPLICA)]
    assert await store.cancel_requested([first.id, second.id]) == set()
    assert (await store.request_cancel(first.id)).id == first.id
    assert await store.cancel_requested([first.id, second.id, uuid4()]) == {first.id}
    assert await store.cancel_requested([]) == set()
    await finish_one(store, first.id, RunOutcome(status=RunStatus.CANCELLED, finished_at=T0))
    assert (await store.get_run(first.id)).status is RunStatus.CANCELLED
    with pytest.raises(RunNotRunning):
        await store.request_cancel(first.id)
    with pytest.raises(RunNotFound):
        await store.request_cancel(uuid4())


async def test_a_cancel_request_carries_its_reason_and_the_first_one_stands(
    store: TaskStore,
) -> None:
    await store.create_task(make_task())
    await store.create_task(make_task())
    first, second = [c.run for c in await store.claim_due(T0, 10, REPLICA)]
    await store.request_cancel(first.id, "cancelled from the console")
    await store.request_cancel(first.id, "a later reason")
    await store.request_cancel(second.id)
    reasons = await store.cancel_reasons([first.id, second.id])
    assert reasons == {first.id: "cancelled from the console", second.id: None}


async def test_a_run_of_a_deleted_task_can_still_be_asked_to_stop(store: TaskStore) -> None:
    """A task's delete leaves its runs in flight to finish; a cancel still reaches them
    (PostgreSQL deletes a task's leases with the task: the request is kept apart, and
    the lost-run sweep forgets it once the run ended). An outside audit found the cancel
    answered 202 and the run went on to succeed."""
    task = await store.create_task(make_task())
    run = await claim_one(store, T0)
    await store.delete_task(task.id)
    assert (await store.request_cancel(run.id, "stop it")).id == run.id
    await store.request_cancel(run.id, "a later reason")
    assert await store.cancel_requested([run.id]) == {run.id}
    assert await store.cancel_reasons([run.id]) == {run.id: "stop it"}
    await finish_one(store, run.id, RunOutcome(status=RunStatus.CANCELLED, finished_at=T0))
    assert (await store.get_run(run.id)).status is RunStatus.CANCELLED
    await store.expire_lost_runs(T0 + MINUTE)
    assert await store.cancel_reasons([run.id]) == {}


async def test_the_cancel_of_a_backfill_reaches_its_runs_after_its_task_is_deleted(
    store: TaskStore,
) -> None:
    task = await store.create_task(make_task(max_running_instances=2, due=None))
    made = await backfill(store, task, PAST[:2], overlap="allow_all")
    running = [c.run.id for c in made.made]
    await store.delete_task(task.id)
    assert await backfills(store).cancel_backfill(made.backfill_id, NOW) == 2
    assert await store.cancel_reasons(running) == dict.fromkeys(running, STOPPED_BY_BACKFILL)


async def test_cancel_of_a_run_never_called_is_refused(store: TaskStore) -> None:
    await store.create_task(make_task(misfire_grace_seconds=0))
    missed = await claim_one(store, T0 + 5 * SECOND)
    assert missed.status is RunStatus.MISSED
    with pytest.raises(RunNotRunning):
        await store.request_cancel(missed.id)


async def test_lost_runs_expire_with_their_lease(store: TaskStore) -> None:
    await store.create_task(make_task(timeout=10))
    run = await claim_one(store, T0)
    expires = T0 + 40 * SECOND
    assert run.lease_expires_at == expires
    assert await store.expire_lost_runs(expires - SECOND) == []
    [lost] = await store.expire_lost_runs(expires + SECOND)
    assert (lost.id, lost.status, lost.error) == (run.id, RunStatus.FAILED, REPLICA_LOST)
    assert lost.finished_at is not None
    assert await store.get_run(run.id) == lost
    assert await store.expire_lost_runs(expires + MINUTE) == []
    # A late outcome changes nothing; the slot is free.
    assert await finish_one(store, run.id, succeeded()) == lost
    assert (await claim_one(store, T0 + MINUTE)).status is RunStatus.RUNNING


async def test_retention_deletes_old_finished_runs_in_batches(store: TaskStore) -> None:
    task = await store.create_task(make_task())
    runs = []
    for minute in range(5):
        run = await claim_one(store, T0 + minute * MINUTE)
        if minute < 4:
            await finish_one(store, run.id, succeeded())
        runs.append(run)
    # Occurrences T0..T0+4m; the last is still running; the cutoff keeps T0+3m on.
    cutoff = T0 + 3 * MINUTE
    assert await store.delete_runs_before(cutoff, 2) == 2
    assert await store.delete_runs_before(cutoff, 2) == 1
    assert await store.delete_runs_before(cutoff, 2) == 0
    left = await store.list_runs(task.id, None, None, 10)
    assert [r.id for r in left] == [runs[4].id, runs[3].id]
    assert await store.delete_runs_before(T0 + MINUTE * 10, 10) == 1  # not the running one
    assert [r.id for r in await store.list_runs(task.id, None, None, 10)] == [runs[4].id]
