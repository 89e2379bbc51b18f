"""The store contract for a backfill's queued runs (docs/policies.md, "Backfill"), on
every store: they wait under the backfill's own overlap, whatever the task's, start in
`scheduled_for` order as slots free (each once, across replicas), and leave the task's
own occurrences as its overlap treats them."""

from __future__ import annotations

import asyncio
from uuid import UUID

from application.ports import TaskStore
from domain.backfills import BACKFILL_QUEUE_BOUND
from domain.overlap import CANCELLED_BY_DELETE, CANCELLED_BY_PAUSE, CANCELLED_BY_POLICY
from domain.runs import RunStatus
from domain.tasks import Task
from tests.adapters.contract_support import REPLICA, SECOND, T0, succeeded
from tests.adapters.contract_support import store as store  # the fixture
from tests.adapters.test_backfill_contract import NOW, PAST, backfill, statuses
from tests.adapters.test_overlap_contract import STEP, add, claim_at, runs_of
from tests.fixtures.backends import Backend


async def finish(store: TaskStore, run_id: UUID, seconds: int) -> list[UUID]:
    """Finish the run at NOW + `seconds`: the ids of the queued runs its slot started."""
    at = NOW + seconds * SECOND
    freed = await store.finish_runs_starting([(run_id, succeeded(at))], at, REPLICA)
    return [claimed.run.id for claimed in freed.started]


async def test_a_skip_task_queues_its_backfill_and_starts_it_in_order(store: TaskStore) -> None:
    task = await add(store, "skip")
    holder = (await claim_at(store, 99))[0].run  # holds the only slot at NOW
    made = await backfill(store, task)
    assert statuses(made) == [RunStatus.QUEUED] * 5
    by_id = {claimed.run.id: claimed.run.scheduled_for for claimed in made.made}

    # The task's own occurrence is skipped at the limit, as on `skip` without a backfill.
    assert [c.run.status for c in await claim_at(store, 100)] == [RunStatus.SKIPPED]

    order = []
    running = holder.id
    for seconds in range(1, 6):
        started = await finish(store, running, seconds)
        assert len(started) == 1
        running = started[0]
        order.append(by_id[running])
    assert order == PAST
    assert await finish(store, running, 6) == []
    stored = await runs_of(store, task)
    assert [r.status for r in stored if r.backfill_id] == [RunStatus.SUCCEEDED] * 5


async def test_a_skip_task_starts_its_own_occurrence_in_a_free_slot(store: TaskStore) -> None:
    task = await add(store, "skip", max_running_instances=2)
    await claim_at(store, 99)
    made = await backfill(store, task, PAST[:3], only_missing=False)
    # One slot was free: the oldest starts, the others wait for slots that free.
    assert statuses(made) == [RunStatus.RUNNING, RunStatus.QUEUED, RunStatus.QUEUED]
    # Both slots are taken now: the task's own occurrence is skipped, queue or not.
    assert [c.run.status for c in await claim_at(store, 100)] == [RunStatus.SKIPPED]


async def test_a_task_switching_overlap_keeps_its_backfill_queued(store: TaskStore) -> None:
    task = await add(store, "buffer_all")
    await claim_at(store, 98)
    own = (await claim_at(store, 99))[0].run
    assert own.status is RunStatus.QUEUED
    made = await backfill(store, task, only_missing=False)
    assert statuses(made) == [RunStatus.QUEUED] * 5

    later = NOW + SECOND
    to_skip = task.model_copy(update={"overlap": "skip", "updated_at": later})
    task = await store.update_task(to_skip, task.version, reschedule=False)
    gone = await store.get_run(own.id)
    assert (gone.status, gone.error) == (RunStatus.CANCELLED, CANCELLED_BY_POLICY)
    for claimed in made.made:
        assert (await store.get_run(claimed.run.id)).status is RunStatus.QUEUED

    back = task.model_copy(update={"overlap": "buffer_one", "updated_at": later})
    await store.update_task(back, task.version, reschedule=False)
    for claimed in made.made:
        assert (await store.get_run(claimed.run.id)).status is RunStatus.QUEUED


async def test_pausing_or_deleting_the_task_cancels_its_backfill_queue(store: TaskStore) -> None:
    paused = await add(store, "skip")
    deleted = await add(store, "skip")
    await claim_at(store, 99)
    waiting = {
        task.id: await backfill(store, task, PAST[:2], only_missing=False)
        for task in (paused, deleted)
    }
    later = NOW + SECOND
    pause = paused.model_copy(update={"enabled": False, "updated_at": later})
    await store.update_task(pause, paused.version, reschedule=True)
    await store.delete_task(deleted.id, at=later)
    for task, error in ((paused, CANCELLED_BY_PAUSE), (deleted, CANCELLED_BY_DELETE)):
        for claimed in waiting[task.id].made:
            run = await store.get_run(claimed.run.id)
            assert (run.status, run.error, run.finished_at) == (RunStatus.CANCELLED, error, later)


async def test_a_backfill_queues_behind_the_bound_whatever_the_task(store: TaskStore) -> None:
    task: Task = await add(store, "skip")
    await claim_at(store, 99)
    first = [T0 + step * STEP for step in range(BACKFILL_QUEUE_BOUND)]
    assert statuses(await backfill(store, task, first)) == [RunStatus.QUEUED] * len(first)
    # The queue is full: the next backfill's runs are recorded skipped.
    more = await backfill(store, task, [NOW - SECOND], only_missing=False)
    assert statuses(more) == [RunStatus.SKIPPED]


async def test_concurrent_finishers_start_each_backfilled_run_once(backend: Backend) -> None:
    stores = [await backend.new_store() for _ in range(3)]
    task = await add(stores[0], "skip", max_running_instances=3)
    running = [(await claim_at(stores[0], step))[0].run for step in (98, 99)]
    made = await backfill(stores[0], task, only_missing=False)
    # One slot was free: the oldest started, four wait.
    assert statuses(made) == [RunStatus.RUNNING] + [RunStatus.QUEUED] * 4
    running.append(made.made[0].run)
    at = NOW + SECOND
    frees = await asyncio.gather(
        *(
            s.finish_runs_starting([(run.id, succeeded(at))], at, f"replica-{i}")
            for i, (s, run) in enumerate(zip(stores, running, strict=True))
        )
    )
    started = [c.run.id for freed in frees for c in freed.started]
    assert len(started) == len(set(started)) == 3
    got = sorted([(await stores[0].get_run(r)).scheduled_for for r in started])
    assert got == PAST[1:4]
