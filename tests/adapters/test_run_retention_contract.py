"""The TaskStore contract for `history_limit` (docs/storage.md, "Retention"), on every
store: a limited task keeps its newest finished runs, the sweep removes the rest in
bounded batches, and runs not finished yet are never removed."""

from __future__ import annotations

from typing import Any

from application.ports import TaskStore
from domain.runs import Run, RunStatus
from domain.tasks import Task
from domain.triggers import IntervalTrigger
from tests.adapters.contract_support import T0, succeeded
from tests.adapters.contract_support import store as store  # the fixture
from tests.adapters.test_overlap_contract import STEP, add, claim_at, runs_of
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import make_task


async def with_finished_runs(store: TaskStore, count: int, **fields: Any) -> Task:
    """A task every 10 s whose first `count` occurrences ran and succeeded."""
    trigger = IntervalTrigger(every=10, anchor=T0)
    task = await store.create_task(make_task(trigger, misfire_grace_seconds=None, **fields))
    for step in range(count):
        [claimed] = await store.claim_due(T0 + step * STEP, 10, "contract:1")
        assert claimed.run.task_id == task.id
        await finish_one(store, claimed.run.id, succeeded(T0 + step * STEP))
    return task


def steps(runs: list[Run]) -> list[int]:
    return [int((run.scheduled_for - T0) / STEP) for run in runs]


async def test_history_limit_is_stored_and_changed(store: TaskStore) -> None:
    task = await store.create_task(make_task(history_limit=3))
    assert (await store.get_task(task.id)).history_limit == 3
    unlimited = task.model_copy(update={"history_limit": None})
    await store.update_task(unlimited, 1, reschedule=False)
    assert (await store.get_task(task.id)).history_limit is None


async def test_the_newest_finished_runs_are_kept_in_bounded_batches(store: TaskStore) -> None:
    task = await with_finished_runs(store, 6, history_limit=2)
    assert await store.delete_runs_over_limit(3) == 3
    assert await store.delete_runs_over_limit(3) == 1
    assert await store.delete_runs_over_limit(3) == 0
    assert steps(await runs_of(store, task)) == [4, 5]


async def test_tasks_without_a_limit_keep_every_run(store: TaskStore) -> None:
    unlimited = await with_finished_runs(store, 3)
    await store.update_task(
        (await store.get_task(unlimited.id)).model_copy(update={"enabled": False}),
        1,
        reschedule=True,
    )
    limited = await with_finished_runs(store, 3, history_limit=1)
    assert await store.delete_runs_over_limit(100) == 2
    assert steps(await runs_of(store, unlimited)) == [0, 1, 2]
    assert steps(await runs_of(store, limited)) == [2]


async def test_queued_and_running_runs_are_neither_counted_nor_removed(
    store: TaskStore,
) -> None:
    task = await add(store, "buffer_one", history_limit=2)
    # Step 0 runs (and keeps running), step 1 queues behind it, steps 2..5 are skipped.
    for step in range(6):
        await claim_at(store, step)
    before = await runs_of(store, task)
    assert [r.status for r in before[:3]] == [
        RunStatus.RUNNING,
        RunStatus.QUEUED,
        RunStatus.SKIPPED,
    ]
    assert await store.delete_runs_over_limit(100) == 2
    left = await runs_of(store, task)
    assert [(step, run.status) for step, run in zip(steps(left), left, strict=True)] == [
        (0, RunStatus.RUNNING),
        (1, RunStatus.QUEUED),
        (4, RunStatus.SKIPPED),
        (5, RunStatus.SKIPPED),
    ]


async def test_a_lowered_limit_is_enforced_by_the_next_sweep(store: TaskStore) -> None:
    task = await with_finished_runs(store, 4, history_limit=10)
    assert await store.delete_runs_over_limit(100) == 0
    current = await store.get_task(task.id)
    limited = current.model_copy(update={"history_limit": 1})
    await store.update_task(limited, current.version, reschedule=False)
    assert await store.delete_runs_over_limit(100) == 3
    assert steps(await runs_of(store, task)) == [3]
