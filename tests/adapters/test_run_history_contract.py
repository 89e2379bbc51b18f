"""The TaskStore contract of a task's runs: newest first, paged once, recent runs per task."""

from __future__ import annotations

from application.ports import RunPageKey, TaskStore
from domain.runs import Run, RunStatus
from tests.adapters.contract_support import MINUTE, REPLICA, T0, claim_one, succeeded
from tests.adapters.contract_support import store as store  # the fixture
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import make_task


async def test_run_history_is_newest_first_and_pages_once(store: TaskStore) -> None:
    task = await store.create_task(make_task(max_running_instances=10))
    other = await store.create_task(make_task(enabled=False))
    runs = [await claim_one(store, T0 + i * MINUTE) for i in range(2)]
    await store.start_manual_run(other.id, T0, REPLICA)
    for i in range(2, 7):
        [claimed] = await store.claim_due(T0 + i * MINUTE, 10, REPLICA)
        runs.append(claimed.run)
    # Two manual runs at one instant: the id breaks the tie.
    runs += [(await store.start_manual_run(task.id, T0 + 3 * MINUTE, REPLICA)).run for _ in "ab"]
    for run in runs[:3]:
        await finish_one(store, run.id, succeeded())
    expected = sorted(runs, key=lambda r: (r.scheduled_for, r.id), reverse=True)
    seen: list[Run] = []
    after = None
    while True:
        page = await store.list_runs(task.id, None, after, 3)
        seen.extend(page)
        if len(page) < 3:
            break
        after = RunPageKey(page[-1].scheduled_for, page[-1].id)
    assert [r.id for r in seen] == [r.id for r in expected]
    done = await store.list_runs(task.id, RunStatus.SUCCEEDED, None, 10)
    assert {r.id for r in done} == {r.id for r in runs[:3]}


async def test_recent_runs_gives_each_task_its_newest_runs(store: TaskStore) -> None:
    busy = await store.create_task(make_task(enabled=False, max_running_instances=10))
    quiet = await store.create_task(make_task(enabled=False))
    idle = await store.create_task(make_task(enabled=False))
    runs = [(await store.start_manual_run(busy.id, T0 + i * MINUTE, REPLICA)).run for i in range(4)]
    [lone] = [(await store.start_manual_run(quiet.id, T0, REPLICA)).run]
    await finish_one(store, runs[0].id, succeeded())
    recent = await store.recent_runs([idle.id, busy.id, quiet.id], 3)
    assert list(recent) == [idle.id, busy.id, quiet.id]
    assert recent[idle.id] == []
    assert [r.id for r in recent[busy.id]] == [r.id for r in reversed(runs[1:])]
    assert recent[busy.id] == await store.list_runs(busy.id, None, None, 3)
    assert [r.id for r in recent[quiet.id]] == [lone.id]
    assert await store.recent_runs([], 3) == {}
