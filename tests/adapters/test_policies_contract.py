"""The TaskStore contract for occurrence policies (docs/policies.md), on every store."""

from __future__ import annotations

from application.ports import TaskStore
from domain.runs import RunStatus
from domain.triggers import IntervalTrigger
from tests.adapters.contract_support import MINUTE, REPLICA, SECOND, T0
from tests.adapters.contract_support import store as store  # the fixture
from tests.fixtures.tasks import make_task


async def test_policies_are_stored_returned_and_updated(store: TaskStore) -> None:
    task = await store.create_task(make_task(catch_up="all", max_catch_up=7))
    read = await store.get_task(task.id)
    assert (read.catch_up, read.max_catch_up, read.overlap) == ("all", 7, "skip")
    changed = task.model_copy(update={"catch_up": "latest", "max_catch_up": 100})
    await store.update_task(changed, task.version, reschedule=False)
    read = await store.get_task(task.id)
    assert (read.catch_up, read.max_catch_up) == ("latest", 100)


async def test_defaults_fold_a_backlog_into_one_run(store: TaskStore) -> None:
    await store.create_task(make_task(misfire_grace_seconds=None))
    claimed = await store.claim_due(T0 + 3 * MINUTE, 10, REPLICA)
    assert [(c.run.status, c.run.coalesced) for c in claimed] == [(RunStatus.RUNNING, 4)]


async def test_catch_up_all_records_a_run_per_occurrence(store: TaskStore) -> None:
    task = await store.create_task(
        make_task(
            IntervalTrigger(every=60, anchor=T0),
            catch_up="all",
            misfire_grace_seconds=150,
            max_running_instances=10,
        )
    )
    now = T0 + 5 * MINUTE + 10 * SECOND
    claimed = await store.claim_due(now, 10, REPLICA)
    got = [(c.run.status, c.run.scheduled_for, c.run.coalesced) for c in claimed]
    assert got == [
        (RunStatus.MISSED, T0 + 2 * MINUTE, 3),
        (RunStatus.RUNNING, T0 + 3 * MINUTE, 1),
        (RunStatus.RUNNING, T0 + 4 * MINUTE, 1),
        (RunStatus.RUNNING, T0 + 5 * MINUTE, 1),
    ]
    assert all(c.run.lease_expires_at for c in claimed[1:])
    stored = {run.id: run for run in await store.list_runs(task.id, None, None, 10)}
    assert {c.run.id for c in claimed} <= set(stored)
    assert (await store.get_task(task.id)).next_run_at == T0 + 6 * MINUTE
    assert await store.claim_due(now, 10, REPLICA) == []


async def test_a_run_folded_beyond_max_catch_up_says_so(store: TaskStore) -> None:
    task = await store.create_task(
        make_task(
            IntervalTrigger(every=60, anchor=T0),
            catch_up="all",
            max_catch_up=2,
            misfire_grace_seconds=3600,
            max_running_instances=10,
        )
    )
    claimed = await store.claim_due(T0 + 5 * MINUTE, 10, REPLICA)
    [folded] = [c.run for c in claimed if c.run.status is RunStatus.MISSED]
    expected = "older than the newest max_catch_up = 2 occurrences of the catch-up; not called"
    assert (folded.coalesced, folded.error) == (4, expected)
    stored = {run.id: run for run in await store.list_runs(task.id, None, None, 10)}
    assert stored[folded.id].error == expected


async def test_caught_up_runs_share_the_slot_limit(store: TaskStore) -> None:
    await store.create_task(
        make_task(catch_up="all", misfire_grace_seconds=None, max_running_instances=2)
    )
    claimed = await store.claim_due(T0 + 3 * MINUTE, 10, REPLICA)
    assert [c.run.status for c in claimed] == [
        RunStatus.RUNNING,
        RunStatus.RUNNING,
        RunStatus.SKIPPED,
        RunStatus.SKIPPED,
    ]
