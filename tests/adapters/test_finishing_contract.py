"""The TaskStore contract of finishing runs, one by one and in batches, on every store."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

import pytest

from application.ports import TaskStore
from domain.outcomes import TaskCount, count_outcomes, finished
from domain.runs import Run, RunOutcome, RunStatus
from domain.triggers import IntervalTrigger
from tests.adapters.contract_support import (
    MINUTE,
    REPLICA,
    SECOND,
    T0,
    claim_one,
    failed,
    succeeded,
)
from tests.adapters.contract_support import store as store  # the fixture
from tests.fixtures.backends import Backend
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import make_task


async def test_finish_records_the_outcome_once(store: TaskStore) -> None:
    await store.create_task(make_task())
    run = await claim_one(store, T0)
    outcome = RunOutcome(
        status=RunStatus.FAILED,
        attempts=3,
        http_status=503,
        response_excerpt="busy",
        error="HTTP 503",
        started_at=T0,
        finished_at=T0 + 2 * SECOND,
    )
    finished = await finish_one(store, run.id, outcome)
    assert finished == run.model_copy(
        update={
            "status": RunStatus.FAILED,
            "attempts": 3,
            "http_status": 503,
            "response_excerpt": "busy",
            "error": "HTTP 503",
            "started_at": T0,
            "finished_at": T0 + 2 * SECOND,
        }
    )
    assert await store.get_run(run.id) == finished
    assert await finish_one(store, run.id, succeeded()) == finished
    assert await store.finish_runs([(uuid4(), succeeded())]) == []


async def test_pause_after_failures_disables_the_task(store: TaskStore) -> None:
    task = await store.create_task(make_task(pause_after_failures=2))
    for minute, expected in [(0, 1), (1, 0), (2, 1)]:
        run = await claim_one(store, T0 + minute * MINUTE)
        outcome = failed() if expected else succeeded()
        await finish_one(store, run.id, outcome)
        current = await store.get_task(task.id)
        assert (current.consecutive_failures, current.enabled) == (expected, True)
    run = await claim_one(store, T0 + 3 * MINUTE)
    await finish_one(store, run.id, failed(T0 + 3 * MINUTE))
    paused = await store.get_task(task.id)
    assert (paused.consecutive_failures, paused.enabled, paused.next_run_at) == (2, False, None)
    assert paused.version > current.version
    assert await store.claim_due(T0 + 10 * MINUTE, 10, REPLICA) == []


# -- finishing in batches --------------------------------------------------------------

S, F, C = RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED


def outcome_at(status: RunStatus, at: datetime) -> RunOutcome:
    return RunOutcome(status=status, attempts=1, error=f"{status} at {at}", finished_at=at)


async def claim_each_second(store: TaskStore, seconds: int) -> dict[UUID, list[Run]]:
    """Claim at T0, T0 + 1 s, …: the runs of each task, in the order claimed."""
    runs: dict[UUID, list[Run]] = {}
    for i in range(seconds):
        for claimed in await store.claim_due(T0 + i * SECOND, 10, REPLICA):
            runs.setdefault(claimed.task.id, []).append(claimed.run)
    return runs


@pytest.mark.parametrize(
    ("statuses", "failures", "paused_by"),
    [
        pytest.param([S, F, F], 2, None, id="failures-count-in-order"),
        pytest.param([F, F, S], 0, None, id="a-success-resets"),
        pytest.param([F, C, F], 2, None, id="a-cancel-leaves-the-count"),
        pytest.param([F, S, F, F, F, S], 0, 4, id="paused-mid-batch-then-reset"),
        pytest.param([F, F, F, F, F], 5, 2, id="paused-mid-batch-still-counting"),
    ],
)
async def test_finish_runs_is_finish_run_in_order(
    store: TaskStore, statuses: list[RunStatus], failures: int, paused_by: int | None
) -> None:
    """A batch leaves a task exactly as the same outcomes recorded one by one leave its
    twin: the runs, the failure count, the pause (at the outcome that reached
    pause_after_failures), the version and updated_at, the leases."""
    trigger = IntervalTrigger(every=1, anchor=T0)
    fields: dict[str, Any] = {"max_running_instances": len(statuses), "pause_after_failures": 3}
    batched, single = [await store.create_task(make_task(trigger, **fields)) for _ in "ab"]
    runs = await claim_each_second(store, len(statuses))
    outcomes = [outcome_at(status, T0 + MINUTE + i * SECOND) for i, status in enumerate(statuses)]

    ids = [r.id for r in runs[batched.id]]
    recorded = await store.finish_runs(list(zip(ids, outcomes, strict=True)))
    one_by_one = [
        await finish_one(store, run.id, outcome)
        for run, outcome in zip(runs[single.id], outcomes, strict=True)
    ]

    assert [r.id for r in recorded] == [r.id for r in runs[batched.id]]
    assert [r.model_dump(exclude={"id", "task_id"}) for r in recorded] == [
        r.model_dump(exclude={"id", "task_id"}) for r in one_by_one
    ]
    assert [await store.get_run(r.id) for r in recorded] == recorded
    task, twin = await store.get_task(batched.id), await store.get_task(single.id)
    assert task.model_dump(exclude={"id", "name"}) == twin.model_dump(exclude={"id", "name"})
    assert task.consecutive_failures == failures
    if paused_by is None:
        assert (task.enabled, task.version) == (True, 1)
        # Every lease was freed: both tasks may run their full max_running_instances again.
        more = await store.claim_due(T0 + len(statuses) * SECOND, 10, REPLICA)
        assert [c.run.status for c in more] == [RunStatus.RUNNING] * 2
    else:
        assert (task.enabled, task.next_fire_at, task.next_run_at) == (False, None, None)
        assert (task.version, task.updated_at) == (2, outcomes[paused_by].finished_at)


async def test_finish_runs_writes_what_the_outcome_rule_decides(store: TaskStore) -> None:
    """The store writes the domain's decisions (domain.outcomes): each run as `finished`
    sets it, each task's count as `count_outcomes` counts the batch."""
    trigger = IntervalTrigger(every=1, anchor=T0)
    limits = [None, 2, 3]
    tasks = [
        await store.create_task(
            make_task(trigger, max_running_instances=10, pause_after_failures=limit)
        )
        for limit in limits
    ]
    runs = await claim_each_second(store, 4)
    pattern = {tasks[0].id: [F, F, C, F], tasks[1].id: [S, F, F, F], tasks[2].id: [F, S, F, F]}
    batch = [
        (run.id, outcome_at(pattern[task_id][i], T0 + MINUTE + i * SECOND))
        for i in range(4)
        for task_id, task_runs in runs.items()
        for run in [task_runs[i]]
    ]
    before = {task.id: TaskCount.of(await store.get_task(task.id)) for task in tasks}
    by_id = {run.id: run for task_runs in runs.values() for run in task_runs}

    recorded = await store.finish_runs(batch)

    assert recorded == [finished(by_id[run_id], outcome) for run_id, outcome in batch]
    expected = before | count_outcomes(before, recorded)
    after = [TaskCount.of(await store.get_task(task.id)) for task in tasks]
    assert [count.task_fields() for count in after] == [
        expected[task.id].task_fields() for task in tasks
    ]
    # Three failures, no limit; paused at its second failure; two failures under three.
    assert [(c.consecutive_failures, c.enabled) for c in after] == [
        (3, True),
        (3, False),
        (2, True),
    ]


async def test_finish_runs_pauses_a_task_mid_batch_and_notifies(
    backend: Backend, store: TaskStore
) -> None:
    trigger = IntervalTrigger(every=1, anchor=T0)
    fields: dict[str, Any] = {"max_running_instances": 10, "pause_after_failures": 2}
    fragile, other = [await store.create_task(make_task(trigger, **fields)) for _ in "ab"]
    runs = await claim_each_second(store, 3)
    statuses = {fragile.id: [F, F, S], other.id: [F, S, F]}
    batch = [
        (runs[task_id][i].id, outcome_at(statuses[task_id][i], T0 + MINUTE + i * SECOND))
        for i in range(3)
        for task_id in (fragile.id, other.id)
    ]
    waker = await backend.new_waker()  # listening from here on
    try:
        recorded = await store.finish_runs(batch)
        await asyncio.wait_for(waker.wait(), 5)
    finally:
        await waker.close()
    assert [r.id for r in recorded] == [run_id for run_id, _ in batch]
    paused = await store.get_task(fragile.id)
    assert (paused.enabled, paused.consecutive_failures, paused.next_run_at) == (False, 0, None)
    assert (paused.version, paused.updated_at) == (2, T0 + MINUTE + SECOND)
    counted = await store.get_task(other.id)
    assert (counted.enabled, counted.consecutive_failures, counted.version) == (True, 1, 1)
    assert [c.task.id for c in await store.claim_due(T0 + 5 * SECOND, 10, REPLICA)] == [other.id]


async def test_finish_runs_leaves_finished_runs_and_unknown_ids_alone(store: TaskStore) -> None:
    task = await store.create_task(
        make_task(IntervalTrigger(every=1, anchor=T0), timeout=1, max_running_instances=10)
    )
    early, lost, running = [await claim_one(store, T0 + i * SECOND) for i in range(3)]
    manual = (await store.start_manual_run(task.id, T0 + 2 * SECOND, REPLICA)).run
    done = await finish_one(store, early.id, succeeded())
    # Leases of 31 s: `lost` (claimed at T0 + 1 s) is swept, `running` and `manual` are not.
    [swept] = await store.expire_lost_runs(T0 + 32 * SECOND + SECOND / 2)
    assert swept.id == lost.id
    assert await store.finish_runs([]) == []
    with pytest.raises(ValueError, match="running"):
        await store.finish_runs(
            [(running.id, succeeded()), (manual.id, outcome_at(RunStatus.RUNNING, T0))]
        )
    assert (await store.get_run(running.id)).status is RunStatus.RUNNING  # nothing written

    recorded = await store.finish_runs(
        [
            (uuid4(), succeeded()),
            (early.id, failed()),
            (running.id, failed()),
            (lost.id, succeeded()),
            (manual.id, failed()),
            (running.id, succeeded()),
        ]
    )
    finished = await store.get_run(running.id)
    assert (finished.status, finished.error) == (RunStatus.FAILED, "HTTP 500")
    assert recorded == [done, finished, swept, await store.get_run(manual.id), finished]
    assert recorded[3].status is RunStatus.FAILED
    # Only the failure of `running` counted: not the finished, lost or manual runs, nor
    # the second outcome of `running`.
    assert (await store.get_task(task.id)).consecutive_failures == 1
