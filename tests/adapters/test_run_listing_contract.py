"""The TaskStore contract of `list_all_runs` (`GET /runs`): every task's runs, filtered,
newest first, each run exactly once across keyset pages. Every store passes it."""

from __future__ import annotations

from datetime import datetime
from uuid import uuid4

import pytest

from application.ports import RunFilter, RunPageKey, TaskStore
from domain.runs import Run, RunStatus
from domain.tasks import Task
from tests.adapters.contract_support import MINUTE, REPLICA, SECOND, T0, failed, succeeded
from tests.fixtures.backends import Backend
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import make_task


@pytest.fixture
async def store(backend: Backend) -> TaskStore:
    return await backend.new_store()


async def manual_run(store: TaskStore, task: Task, at: datetime, outcome: str) -> Run:
    """A finished manual run of `task` scheduled for `at` (`outcome`: succeeded/failed)."""
    claimed = await store.start_manual_run(task.id, at, REPLICA)
    end = succeeded(at) if outcome == "succeeded" else failed(at)
    return await finish_one(store, claimed.run.id, end)


async def every_page(store: TaskStore, run_filter: RunFilter, size: int) -> list[Run]:
    seen: list[Run] = []
    after = None
    while True:
        page = await store.list_all_runs(run_filter, after, size)
        seen.extend(page)
        if len(page) < size:
            return seen
        after = RunPageKey(page[-1].scheduled_for, page[-1].id)


def newest_first(runs: list[Run]) -> list[Run]:
    return sorted(runs, key=lambda run: (run.scheduled_for, run.id), reverse=True)


async def test_runs_of_every_task_newest_first_with_each_filter(store: TaskStore) -> None:
    red = await store.create_task(make_task(name="red", tags=["red", "shared"]))
    blue = await store.create_task(make_task(name="blue", tags=["blue", "shared"]))
    plain = await store.create_task(make_task(name="plain"))
    runs = [
        await manual_run(store, red, T0, "succeeded"),
        await manual_run(store, blue, T0 + MINUTE, "failed"),
        await manual_run(store, plain, T0 + 2 * MINUTE, "succeeded"),
        await manual_run(store, red, T0 + 3 * MINUTE, "failed"),
        await manual_run(store, blue, T0 + 4 * MINUTE, "succeeded"),
    ]
    assert all(run.backfill_id is None for run in runs)

    async def listed(**fields: object) -> list[Run]:
        return await store.list_all_runs(RunFilter(**fields), None, 100)  # type: ignore[arg-type]

    assert await listed() == newest_first(runs)
    assert await listed(status=RunStatus.FAILED) == [runs[3], runs[1]]
    assert await listed(task_id=red.id) == [runs[3], runs[0]]
    assert await listed(tag="shared") == [runs[4], runs[3], runs[1], runs[0]]
    assert await listed(tag="blue", status=RunStatus.SUCCEEDED) == [runs[4]]
    assert await listed(tag="blue", task_id=red.id) == []
    assert await listed(tag="red", task_id=red.id) == [runs[3], runs[0]]
    assert await listed(tag="nobody") == []
    # since and until are inclusive bounds on scheduled_for.
    assert await listed(since=T0 + MINUTE, until=T0 + 3 * MINUTE) == runs[3:0:-1]
    assert await listed(since=T0 + 4 * MINUTE) == [runs[4]]
    assert await listed(until=T0) == [runs[0]]
    assert await listed(backfill_id=uuid4()) == []
    assert await listed(task_id=uuid4()) == []


async def test_pages_list_every_run_once_while_runs_are_written(store: TaskStore) -> None:
    tasks = [await store.create_task(make_task(tags=["paged"])) for _ in range(3)]
    runs = []
    for i in range(17):
        # Runs share a scheduled_for in threes, so the id breaks ties.
        at = T0 + (i // 3) * MINUTE
        runs.append(await manual_run(store, tasks[i % 3], at, "succeeded"))
    for run_filter in (RunFilter(), RunFilter(tag="paged"), RunFilter(status=RunStatus.SUCCEEDED)):
        assert await every_page(store, run_filter, 4) == newest_first(runs), run_filter

    # Between two pages, newer runs and one older than the cursor are written.
    first = await store.list_all_runs(RunFilter(tag="paged"), None, 5)
    after = RunPageKey(first[-1].scheduled_for, first[-1].id)
    newer = await manual_run(store, tasks[0], T0 + 10 * MINUTE, "failed")
    older = await manual_run(store, tasks[1], T0 - MINUTE, "failed")
    rest = await store.list_all_runs(RunFilter(tag="paged"), after, 100)
    listed = first + rest
    assert len({run.id for run in listed}) == len(listed)
    assert newer not in listed
    assert listed == [*newest_first(runs), older]


async def test_runs_of_a_deleted_task_stay_listed_by_its_id(store: TaskStore) -> None:
    task = await store.create_task(make_task(tags=["gone"]))
    run = await manual_run(store, task, T0, "succeeded")
    await store.delete_task(task.id)
    assert await store.list_all_runs(RunFilter(task_id=task.id), None, 10) == [run]
    assert await store.list_all_runs(RunFilter(), None, 10) == [run]
    # A tag is a property of tasks that exist.
    assert await store.list_all_runs(RunFilter(tag="gone"), None, 10) == []


async def test_scheduled_runs_and_their_statuses_are_listed(store: TaskStore) -> None:
    task = await store.create_task(make_task(max_running_instances=1))
    first = (await store.claim_due(T0, 10, REPLICA))[0].run
    skipped = (await store.start_manual_run(task.id, T0 + SECOND, REPLICA)).run
    assert skipped.status is RunStatus.SKIPPED
    listed = await store.list_all_runs(RunFilter(status=RunStatus.RUNNING), None, 10)
    assert listed == [first]
    assert await store.list_all_runs(RunFilter(status=RunStatus.SKIPPED), None, 10) == [skipped]
