"""The TaskStore contract for `overlap` and queued runs (docs/policies.md, "Overlap"), on
every store: what an occurrence does when its task's slots are taken, and how queued
runs start, in order, when a slot frees."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import pytest

from application.ports import RunFilter, TaskStore
from domain.errors import RunNotRunning
from domain.overlap import (
    CANCELLED_BY_DELETE,
    CANCELLED_BY_PAUSE,
    CANCELLED_BY_POLICY,
    CANCELLED_BY_REQUEST,
    replaced_by,
)
from domain.runs import REPLICA_LOST, ClaimedRun, Run, RunOutcome, RunStatus
from domain.tasks import Task
from domain.triggers import IntervalTrigger
from tests.adapters.contract_support import REPLICA, SECOND, T0, failed, succeeded
from tests.adapters.contract_support import store as store  # the fixture
from tests.fixtures.backends import Backend
from tests.fixtures.tasks import make_task

OTHER = "contract:2"
# Occurrences this far apart: well within a run's lease (60 s at least), so a run
# claimed for one still holds its slot at the next few.
STEP = 10 * SECOND


async def add(store: TaskStore, overlap: str, **fields: Any) -> Task:
    trigger = IntervalTrigger(every=10, anchor=T0)
    task = make_task(trigger, overlap=overlap, misfire_grace_seconds=None, **fields)
    return await store.create_task(task)


async def claim_at(store: TaskStore, steps: int, replica: str = REPLICA) -> list[ClaimedRun]:
    return await store.claim_due(T0 + steps * STEP, 10, replica)


def statuses(claimed: list[ClaimedRun]) -> list[tuple[RunStatus, object]]:
    return [(c.run.status, c.run.scheduled_for) for c in claimed]


async def runs_of(store: TaskStore, task: Task) -> list[Run]:
    """Oldest first."""
    return list(reversed(await store.list_runs(task.id, None, None, 100)))


def cancelled(at_steps: int, error: str) -> RunOutcome:
    at = T0 + at_steps * STEP
    return RunOutcome(status=RunStatus.CANCELLED, error=error, started_at=at, finished_at=at)


async def test_skip_stays_the_default(store: TaskStore) -> None:
    task = await store.create_task(
        make_task(IntervalTrigger(every=10, anchor=T0), misfire_grace_seconds=None)
    )
    assert task.overlap == "skip"
    await claim_at(store, 0)
    assert [c.run.status for c in await claim_at(store, 1)] == [RunStatus.SKIPPED]


async def test_buffer_one_queues_one_and_skips_the_rest(store: TaskStore) -> None:
    task = await add(store, "buffer_one")
    first = (await claim_at(store, 0))[0].run
    second = await claim_at(store, 1)
    third = await claim_at(store, 2)
    assert statuses(second) == [(RunStatus.QUEUED, T0 + STEP)]
    assert statuses(third) == [(RunStatus.SKIPPED, T0 + 2 * STEP)]
    queued = second[0].run
    assert (queued.started_at, queued.finished_at, queued.lease_expires_at) == (None, None, None)
    assert queued.error is None

    freed = await store.finish_runs_starting(
        [(first.id, succeeded(T0 + 2 * STEP))], T0 + 2 * STEP + 5 * SECOND, OTHER
    )
    assert [r.status for r in freed.runs] == [RunStatus.SUCCEEDED]
    assert [c.run.id for c in freed.started] == [queued.id]
    started = freed.started[0].run
    assert started.status is RunStatus.RUNNING
    assert started.replica == OTHER
    assert started.started_at == T0 + 2 * STEP + 5 * SECOND
    assert started.lease_expires_at is not None and started.lease_expires_at > started.started_at
    assert freed.started[0].task.id == task.id
    assert await store.get_run(queued.id) == started
    # Its slot is taken now: the next occurrence queues again.
    assert [c.run.status for c in await claim_at(store, 3)] == [RunStatus.QUEUED]


async def test_buffer_all_starts_every_queued_run_once_in_order(store: TaskStore) -> None:
    task = await add(store, "buffer_all")
    running = (await claim_at(store, 0))[0].run
    for step in (1, 2, 3):
        assert [c.run.status for c in await claim_at(store, step)] == [RunStatus.QUEUED]
    order = []
    for step in (4, 5, 6):
        freed = await store.finish_runs_starting(
            [(running.id, succeeded(T0 + step * STEP))], T0 + step * STEP, REPLICA
        )
        assert len(freed.started) == 1
        running = freed.started[0].run
        order.append(running.scheduled_for)
    assert order == [T0 + STEP, T0 + 2 * STEP, T0 + 3 * STEP]
    freed = await store.finish_runs_starting(
        [(running.id, succeeded(T0 + 7 * STEP))], T0 + 7 * STEP, REPLICA
    )
    assert freed.started == []
    assert {r.status for r in await runs_of(store, task)} == {RunStatus.SUCCEEDED}


async def test_queued_runs_fill_every_free_slot(store: TaskStore) -> None:
    task = await add(store, "buffer_all", max_running_instances=2)
    first = await claim_at(store, 0)
    second = await claim_at(store, 1)
    assert [c.run.status for c in first + second] == [RunStatus.RUNNING, RunStatus.RUNNING]
    for step in (2, 3, 4):
        assert [c.run.status for c in await claim_at(store, step)] == [RunStatus.QUEUED]
    outcomes = [(c.run.id, succeeded(T0 + 5 * STEP)) for c in first + second]
    freed = await store.finish_runs_starting(outcomes, T0 + 5 * STEP, REPLICA)
    assert [c.run.scheduled_for for c in freed.started] == [T0 + 2 * STEP, T0 + 3 * STEP]
    queued = await store.list_runs(task.id, RunStatus.QUEUED, None, 10)
    assert [r.scheduled_for for r in queued] == [T0 + 4 * STEP]


async def test_a_claim_starts_the_queue_before_anything_claimed_after_it(store: TaskStore) -> None:
    task = await add(store, "buffer_all")
    running = (await claim_at(store, 0))[0].run
    queued = (await claim_at(store, 1))[0].run
    # Finished without starting anything (no replica to call it): the next claim does.
    await store.finish_runs([(running.id, succeeded(T0 + STEP))])
    claimed = await claim_at(store, 2)
    assert statuses(claimed) == [
        (RunStatus.RUNNING, T0 + STEP),
        (RunStatus.QUEUED, T0 + 2 * STEP),
    ]
    assert claimed[0].run.id == queued.id
    assert claimed[0].task.id == task.id


async def test_replace_asks_the_oldest_run_to_stop_and_waits_for_its_slot(
    store: TaskStore,
) -> None:
    task = await add(store, "replace")
    old = (await claim_at(store, 0))[0].run
    new = (await claim_at(store, 1))[0].run
    assert new.status is RunStatus.QUEUED
    assert await store.cancel_reasons([old.id, new.id]) == {old.id: replaced_by(new.id)}
    # The owner stops it with that error; the slot goes to the new run.
    freed = await store.finish_runs_starting(
        [(old.id, cancelled(1, replaced_by(new.id)))], T0 + STEP + SECOND, REPLICA
    )
    assert freed.runs[0].status is RunStatus.CANCELLED
    assert freed.runs[0].error == f"replaced by run {new.id}"
    assert [c.run.id for c in freed.started] == [new.id]
    assert (await store.get_run(new.id)).status is RunStatus.RUNNING
    assert await store.cancel_reasons([new.id]) == {}
    assert len(await runs_of(store, task)) == 2


async def test_replace_while_the_run_is_being_stopped_replaces_the_waiting_one(
    store: TaskStore,
) -> None:
    await add(store, "replace")
    old = (await claim_at(store, 0))[0].run
    waiting = (await claim_at(store, 1))[0].run
    newest = (await claim_at(store, 2))[0].run
    assert newest.status is RunStatus.QUEUED
    gone = await store.get_run(waiting.id)
    assert (gone.status, gone.error) == (RunStatus.CANCELLED, replaced_by(newest.id))
    assert gone.started_at is None and gone.finished_at == T0 + 2 * STEP
    assert await store.cancel_reasons([old.id]) == {old.id: replaced_by(waiting.id)}
    freed = await store.finish_runs_starting(
        [(old.id, cancelled(2, replaced_by(waiting.id)))], T0 + 2 * STEP, REPLICA
    )
    assert [c.run.id for c in freed.started] == [newest.id]


async def test_a_queued_run_is_cancelled_at_once_and_never_starts(store: TaskStore) -> None:
    await add(store, "buffer_all")
    running = (await claim_at(store, 0))[0].run
    first = (await claim_at(store, 1))[0].run
    second = (await claim_at(store, 2))[0].run
    run = await store.request_cancel(first.id)
    assert (run.status, run.error) == (RunStatus.CANCELLED, CANCELLED_BY_REQUEST)
    assert run.started_at is None and run.finished_at is not None
    assert await store.get_run(first.id) == run
    with pytest.raises(RunNotRunning):
        await store.request_cancel(first.id)
    freed = await store.finish_runs_starting(
        [(running.id, succeeded(T0 + 3 * STEP))], T0 + 3 * STEP, REPLICA
    )
    assert [c.run.id for c in freed.started] == [second.id]


async def test_a_queued_run_cancelled_with_a_reason_records_it(store: TaskStore) -> None:
    await add(store, "buffer_all")
    await claim_at(store, 0)
    queued = (await claim_at(store, 1))[0].run
    told = await store.request_cancel(queued.id, "cancelled from the console")
    assert (told.status, told.error) == (RunStatus.CANCELLED, "cancelled from the console")
    assert await store.get_run(queued.id) == told


async def test_pausing_deleting_or_skipping_cancels_the_queue(store: TaskStore) -> None:
    paused = await add(store, "buffer_all")
    deleted = await add(store, "buffer_all")
    skipping = await add(store, "buffer_one")
    await claim_at(store, 0)
    await claim_at(store, 1)
    queued = {
        r.task_id: r for r in await store.list_all_runs(RunFilter(RunStatus.QUEUED), None, 10)
    }
    assert set(queued) == {paused.id, deleted.id, skipping.id}

    later = T0 + 2 * STEP
    pause = paused.model_copy(update={"enabled": False, "updated_at": later})
    await store.update_task(pause, paused.version, reschedule=True)
    to_skip = skipping.model_copy(update={"overlap": "skip", "updated_at": later})
    await store.update_task(to_skip, skipping.version, reschedule=False)
    await store.delete_task(deleted.id, at=later)

    errors = {task_id: (await store.get_run(run.id)).error for task_id, run in queued.items()}
    assert errors == {
        paused.id: CANCELLED_BY_PAUSE,
        deleted.id: CANCELLED_BY_DELETE,
        skipping.id: CANCELLED_BY_POLICY,
    }
    for run in queued.values():
        got = await store.get_run(run.id)
        assert (got.status, got.finished_at, got.started_at) == (RunStatus.CANCELLED, later, None)
    assert await store.list_all_runs(RunFilter(RunStatus.QUEUED), None, 10) == []


async def test_an_auto_pause_cancels_the_queue(store: TaskStore) -> None:
    task = await add(store, "buffer_all", pause_after_failures=1)
    running = (await claim_at(store, 0))[0].run
    queued = (await claim_at(store, 1))[0].run
    freed = await store.finish_runs_starting(
        [(running.id, failed(T0 + 2 * STEP))], T0 + 2 * STEP, REPLICA
    )
    assert freed.started == []
    assert not (await store.get_task(task.id)).enabled
    run = await store.get_run(queued.id)
    assert (run.status, run.error) == (RunStatus.CANCELLED, CANCELLED_BY_PAUSE)


async def test_a_lost_run_frees_its_slot_for_the_queue(store: TaskStore) -> None:
    await add(store, "buffer_all", timeout=5)
    lost = (await claim_at(store, 0))[0].run
    queued = (await claim_at(store, 1))[0].run
    assert lost.lease_expires_at is not None
    before = await store.expire_lost_runs_starting(lost.lease_expires_at, OTHER)
    assert before.runs == [] and before.started == []
    after = lost.lease_expires_at + SECOND
    freed = await store.expire_lost_runs_starting(after, OTHER)
    assert [(r.id, r.status, r.error) for r in freed.runs] == [
        (lost.id, RunStatus.FAILED, REPLICA_LOST)
    ]
    assert [(c.run.id, c.run.replica, c.run.started_at) for c in freed.started] == [
        (queued.id, OTHER, after)
    ]


async def test_queued_runs_are_listed_and_kept_by_retention(store: TaskStore) -> None:
    task = await add(store, "buffer_one")
    await claim_at(store, 0)
    queued = (await claim_at(store, 1))[0].run
    listed = await store.list_all_runs(RunFilter(status=RunStatus.QUEUED), None, 10)
    assert [r.id for r in listed] == [queued.id]
    assert [r.id for r in await store.list_runs(task.id, RunStatus.QUEUED, None, 10)] == [queued.id]
    await store.delete_runs_before(T0 + 10 * STEP, 100)
    assert (await store.get_run(queued.id)).status is RunStatus.QUEUED


async def test_catch_up_all_queues_the_backlog_in_order(store: TaskStore) -> None:
    await add(store, "buffer_all", catch_up="all")
    claimed = await claim_at(store, 3)
    assert statuses(claimed) == [
        (RunStatus.RUNNING, T0),
        (RunStatus.QUEUED, T0 + STEP),
        (RunStatus.QUEUED, T0 + 2 * STEP),
        (RunStatus.QUEUED, T0 + 3 * STEP),
    ]


async def test_concurrent_finishers_never_start_a_queued_run_twice(backend: Backend) -> None:
    stores = [await backend.new_store() for _ in range(3)]
    await add(stores[0], "buffer_all", max_running_instances=3)
    running = []
    for step in range(3):
        running += (await claim_at(stores[0], step))[0:1]
    for step in range(3, 6):
        assert [c.run.status for c in await claim_at(stores[0], step)] == [RunStatus.QUEUED]
    at = T0 + 5 * STEP
    frees = await asyncio.gather(
        *(
            s.finish_runs_starting([(c.run.id, succeeded(at))], at, f"replica-{i}")
            for i, (s, c) in enumerate(zip(stores, running, strict=True))
        )
    )
    started: list[UUID] = [c.run.id for freed in frees for c in freed.started]
    assert len(started) == len(set(started)) == 3
    got = sorted([(await stores[0].get_run(r)).scheduled_for for r in started])
    assert got == [T0 + 3 * STEP, T0 + 4 * STEP, T0 + 5 * STEP]


async def test_a_caught_up_backlog_under_replace_keeps_only_the_newest_waiting(
    store: TaskStore,
) -> None:
    await add(store, "replace", catch_up="all")
    first, second, third = await claim_at(store, 2)
    assert statuses([first, third]) == [(RunStatus.RUNNING, T0), (RunStatus.QUEUED, T0 + 2 * STEP)]
    # The first asked to stop for the second, which the third then replaced.
    assert await store.cancel_reasons([first.run.id]) == {first.run.id: replaced_by(second.run.id)}
    gone = await store.get_run(second.run.id)
    assert (gone.status, gone.error) == (RunStatus.CANCELLED, replaced_by(third.run.id))
    assert second.run.status is RunStatus.CANCELLED
