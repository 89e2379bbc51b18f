"""The TaskStore contract of claims: what is due, once, and the leases it takes, on every store."""

from __future__ import annotations

from datetime import timedelta

import pytest

from application.ports import TaskStore
from domain.claims import lease_duration, run_instant
from domain.runs import RunStatus
from domain.triggers import IntervalTrigger, OneShotTrigger, Trigger
from tests.adapters.contract_support import (
    MINUTE,
    MINUTELY,
    REPLICA,
    SECOND,
    T0,
    claim_one,
    failed,
    succeeded,
)
from tests.adapters.contract_support import store as store  # the fixture
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import make_task

# -- claims -----------------------------------------------------------------------------


@pytest.mark.parametrize("trigger", [MINUTELY, IntervalTrigger(every=60, anchor=T0)])
async def test_claim_takes_what_is_due_once(store: TaskStore, trigger: Trigger) -> None:
    task = await store.create_task(make_task(trigger))
    assert task.next_run_at == T0
    assert await store.claim_due(T0 - SECOND, 10, REPLICA) == []
    [claimed] = await store.claim_due(T0, 10, REPLICA)
    run = claimed.run
    assert claimed.task.id == task.id
    assert claimed.should_call
    assert (run.task_id, run.scheduled_for, run.coalesced) == (task.id, T0, 1)
    assert (run.status, run.manual, run.replica, run.claimed_at) == (
        RunStatus.RUNNING,
        False,
        REPLICA,
        T0,
    )
    assert run.lease_expires_at == T0 + lease_duration(task.target)
    assert await store.claim_due(T0 + 30 * SECOND, 10, REPLICA) == []
    stored = await store.get_task(task.id)
    assert (stored.next_fire_at, stored.next_run_at) == (T0 + MINUTE, T0 + MINUTE)
    assert await store.get_run(run.id) == run


async def test_claim_takes_the_earliest_first_up_to_the_limit(store: TaskStore) -> None:
    tasks = [await store.create_task(make_task(now=T0 + i * SECOND)) for i in (3, 0, 4, 1, 2)]
    by_due = sorted(tasks, key=lambda t: t.next_run_at or T0)
    first = await store.claim_due(T0 + MINUTE - SECOND, 2, REPLICA)
    assert [c.task.id for c in first] == [t.id for t in by_due[:2]]
    rest = await store.claim_due(T0 + MINUTE - SECOND, 10, REPLICA)
    assert [c.task.id for c in rest] == [t.id for t in by_due[2:]]


async def test_disabled_tasks_are_not_claimed(store: TaskStore) -> None:
    task = await store.create_task(make_task())
    paused = task.model_copy(update={"enabled": False, "next_fire_at": None, "next_run_at": None})
    await store.update_task(paused, 1, reschedule=True)
    assert await store.claim_due(T0 + MINUTE, 10, REPLICA) == []
    assert await store.next_due_at() is None
    # Disabled with a stale next_run_at: still never claimed.
    other = await store.create_task(make_task())
    await store.update_task(other.model_copy(update={"enabled": False}), 1, reschedule=False)
    assert await store.claim_due(T0 + MINUTE, 10, REPLICA) == []


async def test_a_claim_past_the_grace_records_missed(store: TaskStore) -> None:
    task = await store.create_task(make_task(misfire_grace_seconds=10))
    [claimed] = await store.claim_due(T0 + 30 * SECOND, 10, REPLICA)
    assert not claimed.should_call
    assert (claimed.run.status, claimed.run.scheduled_for) == (RunStatus.MISSED, T0)
    assert claimed.run.lease_expires_at is None
    assert (await store.get_task(task.id)).next_run_at == T0 + MINUTE
    # A missed run holds no slot.
    assert (await claim_one(store, T0 + MINUTE)).status is RunStatus.RUNNING


async def test_downtime_coalesces_into_one_run(store: TaskStore) -> None:
    task = await store.create_task(make_task(misfire_grace_seconds=None))
    run = await claim_one(store, T0 + 5 * MINUTE + 10 * SECOND)
    assert (run.status, run.scheduled_for, run.coalesced) == (RunStatus.RUNNING, T0 + 5 * MINUTE, 6)
    assert (await store.get_task(task.id)).next_run_at == T0 + 6 * MINUTE


async def test_a_spent_one_shot_stays_enabled_with_no_next_run(store: TaskStore) -> None:
    task = await store.create_task(make_task(OneShotTrigger(run_at=T0 + MINUTE)))
    assert await store.next_due_at() == T0 + MINUTE
    run = await claim_one(store, T0 + MINUTE)
    assert run.scheduled_for == T0 + MINUTE
    spent = await store.get_task(task.id)
    assert spent.enabled
    assert (spent.next_fire_at, spent.next_run_at) == (None, None)
    assert await store.next_due_at() is None
    assert await store.claim_due(T0 + 60 * MINUTE, 10, REPLICA) == []


async def test_jitter_is_deterministic(store: TaskStore) -> None:
    task = await store.create_task(make_task(MINUTELY, jitter_seconds=50))
    assert task.next_run_at == run_instant(task, T0)
    for minute in range(3):
        occurrence = T0 + minute * MINUTE
        due = run_instant(task, occurrence)
        assert due is not None and occurrence <= due < occurrence + 50 * SECOND
        if due > occurrence:
            assert await store.claim_due(due - SECOND, 10, REPLICA) == []
        run = await claim_one(store, due)
        assert run.scheduled_for == occurrence  # un-jittered
        await finish_one(store, run.id, succeeded(due))
        assert (await store.get_task(task.id)).next_run_at == run_instant(task, occurrence + MINUTE)


async def test_next_due_at_is_the_earliest_enabled(store: TaskStore) -> None:
    assert await store.next_due_at() is None
    await store.create_task(make_task(now=T0 + 20 * SECOND))
    await store.create_task(make_task(now=T0 + 10 * SECOND))
    await store.create_task(make_task(now=T0, enabled=False))
    assert await store.next_due_at() == T0 + 10 * SECOND


# -- leases -----------------------------------------------------------------------------


async def test_lease_limit_skips_and_finishing_frees_the_slot(store: TaskStore) -> None:
    await store.create_task(make_task(timeout=120))
    first = await claim_one(store, T0)
    skipped = await claim_one(store, T0 + MINUTE)
    assert (skipped.status, skipped.lease_expires_at) == (RunStatus.SKIPPED, None)
    await finish_one(store, first.id, succeeded())
    assert (await claim_one(store, T0 + 2 * MINUTE)).status is RunStatus.RUNNING


async def test_several_instances_share_the_limit(store: TaskStore) -> None:
    await store.create_task(make_task(IntervalTrigger(every=1, anchor=T0), max_running_instances=2))
    statuses = [(await claim_one(store, T0 + i * SECOND)).status for i in range(3)]
    assert statuses == [RunStatus.RUNNING, RunStatus.RUNNING, RunStatus.SKIPPED]


async def test_an_expired_lease_no_longer_counts(store: TaskStore) -> None:
    await store.create_task(make_task(IntervalTrigger(every=10, anchor=T0), timeout=1))
    first = await claim_one(store, T0)
    assert first.lease_expires_at == T0 + 31 * SECOND
    assert (await claim_one(store, T0 + 30 * SECOND)).status is RunStatus.SKIPPED
    # No sweep ran: the lease counts against the caller's `now` alone.
    assert (await claim_one(store, T0 + 40 * SECOND)).status is RunStatus.RUNNING


async def test_manual_runs_take_a_lease_and_leave_the_schedule(store: TaskStore) -> None:
    task = await store.create_task(make_task(enabled=False))
    now = T0 + 90 * SECOND + timedelta(milliseconds=400)
    claimed = await store.start_manual_run(task.id, now, REPLICA)
    run = claimed.run
    assert claimed.should_call
    assert (run.status, run.manual, run.scheduled_for, run.coalesced) == (
        RunStatus.RUNNING,
        True,
        T0 + 90 * SECOND,
        1,
    )
    assert run.lease_expires_at is not None
    again = await store.start_manual_run(task.id, now, REPLICA)
    assert again.run.status is RunStatus.SKIPPED
    after = await store.get_task(task.id)
    assert (after.enabled, after.next_fire_at, after.next_run_at, after.version) == (
        False,
        None,
        None,
        1,
    )
    await finish_one(store, run.id, failed(now))
    assert (await store.get_task(task.id)).consecutive_failures == 0  # manual runs don't count


async def test_every_claim_records_the_latest_occurrence_it_took(store: TaskStore) -> None:
    # What a new schedule may never claim again (domain.claims.rescheduled), whatever
    # the run became: called, skipped, missed.
    task = await store.create_task(make_task(max_running_instances=1, timeout=120))
    assert (await store.get_task(task.id)).claimed_through is None
    await claim_one(store, T0)
    assert (await store.get_task(task.id)).claimed_through == T0
    skipped = await claim_one(store, T0 + MINUTE)  # the first still holds the one slot
    assert skipped.status is RunStatus.SKIPPED
    assert (await store.get_task(task.id)).claimed_through == T0 + MINUTE


async def test_a_running_runs_lease_is_renewed_only_while_it_holds(store: TaskStore) -> None:
    task = await store.create_task(make_task(enabled=False))
    run = (await store.start_manual_run(task.id, T0, REPLICA)).run
    assert run.lease_expires_at is not None
    old = run.lease_expires_at
    renewed = await store.renew_lease(run, old - SECOND, old + MINUTE)
    assert renewed is not None and renewed.lease_expires_at == old + MINUTE
    assert (await store.get_run(run.id)).lease_expires_at == old + MINUTE
    # It holds its slot and stays the replica's past the old end, until the new one.
    past_old = old + SECOND
    assert (await store.start_manual_run(task.id, past_old, REPLICA)).run.status is (
        RunStatus.SKIPPED
    )
    assert await store.expire_lost_runs(past_old) == []
    # Past its lease, or ended, a run's lease is not renewed.
    assert await store.renew_lease(renewed, old + MINUTE, old + 2 * MINUTE) is None
    assert (await store.get_run(run.id)).lease_expires_at == old + MINUTE
    other = (await store.start_manual_run(task.id, old + 2 * MINUTE, REPLICA)).run
    await finish_one(store, other.id, failed(old + 2 * MINUTE))
    assert await store.renew_lease(other, old + 2 * MINUTE, old + 3 * MINUTE) is None


async def test_a_manual_run_its_replica_cannot_call_is_skipped_with_the_reason(
    store: TaskStore,
) -> None:
    task = await store.create_task(make_task(enabled=False))
    busy = "fired on a replica already making its max_concurrent_runs = 2 calls; not called"
    skipped = await store.start_manual_run(task.id, T0, REPLICA, busy)
    assert not skipped.should_call
    assert (skipped.run.status, skipped.run.error, skipped.run.lease_expires_at) == (
        RunStatus.SKIPPED,
        busy,
        None,
    )
    assert (await store.get_run(skipped.run.id)).error == busy
    # It held no slot: the next fire, on a replica with room, is called.
    called = await store.start_manual_run(task.id, T0 + SECOND, REPLICA)
    assert called.should_call and called.run.status is RunStatus.RUNNING
    # With the task's slots full, the task's reason is given, not the replica's.
    again = await store.start_manual_run(task.id, T0 + 2 * SECOND, REPLICA, busy)
    assert again.run.status is RunStatus.SKIPPED
    assert again.run.error == "max_running_instances runs were in flight; not called"
