"""The TaskStore contract: every store adapter passes this module (memory, PostgreSQL).

Time is whatever the test says it is: every call that needs an instant takes one.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest

from application.ports import RunPageKey, TaskFilter, TaskPageKey, TaskStore
from domain.claims import lease_duration, run_instant
from domain.errors import (
    DuplicateTaskName,
    RunNotFound,
    RunNotRunning,
    TaskNotFound,
    VersionConflict,
)
from domain.outcomes import TaskCount, count_outcomes, finished
from domain.runs import REPLICA_LOST, Run, RunOutcome, RunStatus
from domain.triggers import CronTrigger, IntervalTrigger, OneShotTrigger, Trigger
from tests.fixtures.backends import Backend
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import make_task

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)
REPLICA = "contract:1"
MINUTELY = CronTrigger(expression="* * * * *")


def succeeded(at: datetime = T0) -> RunOutcome:
    return RunOutcome(
        status=RunStatus.SUCCEEDED,
        attempts=1,
        http_status=200,
        response_excerpt="ok",
        started_at=at,
        finished_at=at + SECOND,
    )


def failed(at: datetime = T0, error: str = "HTTP 500") -> RunOutcome:
    return RunOutcome(
        status=RunStatus.FAILED, attempts=2, http_status=500, error=error, finished_at=at + SECOND
    )


@pytest.fixture
async def store(backend: Backend) -> TaskStore:
    return await backend.new_store()


async def claim_one(store: TaskStore, now: datetime) -> Run:
    claimed = await store.claim_due(now, 10, REPLICA)
    assert len(claimed) == 1, claimed
    return claimed[0].run


# -- tasks ------------------------------------------------------------------------------


async def test_create_get_and_get_by_name(store: TaskStore) -> None:
    task = make_task(MINUTELY, tags=["a", "b"], description="hello")
    created = await store.create_task(task)
    assert created == task.model_copy(update={"version": 1})
    assert await store.get_task(task.id) == created
    assert await store.get_task_by_name(task.name) == created


async def test_unknown_tasks_are_not_found(store: TaskStore) -> None:
    with pytest.raises(TaskNotFound):
        await store.get_task(uuid4())
    with pytest.raises(TaskNotFound):
        await store.get_task_by_name("nobody")
    with pytest.raises(TaskNotFound):
        await store.delete_task(uuid4())
    with pytest.raises(TaskNotFound):
        await store.update_task(make_task(), 1, reschedule=False)
    with pytest.raises(TaskNotFound):
        await store.start_manual_run(uuid4(), T0, REPLICA)


async def test_duplicate_name_is_rejected(store: TaskStore) -> None:
    await store.create_task(make_task(name="twice"))
    with pytest.raises(DuplicateTaskName):
        await store.create_task(make_task(name="twice"))


async def test_list_filters(store: TaskStore) -> None:
    red = await store.create_task(make_task(name="red-1", tags=["red"]))
    blue = await store.create_task(make_task(name="blue-1", tags=["blue"], enabled=False))
    both = await store.create_task(make_task(name="red-2", tags=["red", "blue"]))

    async def names(task_filter: TaskFilter) -> set[str]:
        return {t.name for t in await store.list_tasks(task_filter, None, 100)}

    assert await names(TaskFilter()) == {red.name, blue.name, both.name}
    assert await names(TaskFilter(enabled=True)) == {red.name, both.name}
    assert await names(TaskFilter(enabled=False)) == {blue.name}
    assert await names(TaskFilter(tag="blue")) == {blue.name, both.name}
    assert await names(TaskFilter(name_prefix="red-")) == {red.name, both.name}
    assert await names(TaskFilter(enabled=True, tag="blue", name_prefix="red")) == {both.name}
    assert await names(TaskFilter(tag="green")) == set()


async def test_list_pages_return_every_task_exactly_once(store: TaskStore) -> None:
    # Groups of tasks share a created_at, so the id breaks ties.
    expected = []
    for i in range(23):
        task = await store.create_task(make_task(now=T0 + (i // 4) * SECOND))
        expected.append((task.created_at, task.id))
    expected.sort()
    seen = []
    after = None
    while True:
        page = await store.list_tasks(TaskFilter(), after, 5)
        seen.extend((t.created_at, t.id) for t in page)
        if len(page) < 5:
            break
        after = TaskPageKey(page[-1].created_at, page[-1].id)
    assert seen == expected


async def test_update_checks_the_version(store: TaskStore) -> None:
    task = await store.create_task(make_task())
    later = T0 + MINUTE
    changed = task.model_copy(update={"description": "new", "updated_at": later})
    updated = await store.update_task(changed, 1, reschedule=False)
    assert (updated.description, updated.version, updated.updated_at) == ("new", 2, later)
    assert updated.created_at == task.created_at
    with pytest.raises(VersionConflict) as conflict:
        await store.update_task(changed, 1, reschedule=False)
    assert conflict.value.actual == 2
    assert await store.get_task(task.id) == updated


async def test_update_to_a_taken_name_is_rejected(store: TaskStore) -> None:
    await store.create_task(make_task(name="first"))
    second = await store.create_task(make_task(name="second"))
    with pytest.raises(DuplicateTaskName):
        await store.update_task(second.model_copy(update={"name": "first"}), 1, reschedule=False)
    renamed = await store.update_task(
        second.model_copy(update={"name": "third"}), 1, reschedule=False
    )
    assert (await store.get_task_by_name("third")).id == renamed.id
    with pytest.raises(TaskNotFound):
        await store.get_task_by_name("second")


async def test_update_keeps_the_schedule_unless_told_to_reschedule(store: TaskStore) -> None:
    read = await store.create_task(make_task())  # due at T0
    await claim_one(store, T0)  # a claim advances the schedule meanwhile
    stale = read.model_copy(update={"description": "x", "consecutive_failures": 5})
    kept = await store.update_task(stale, 1, reschedule=False)
    assert (kept.next_fire_at, kept.next_run_at) == (T0 + MINUTE, T0 + MINUTE)
    assert kept.consecutive_failures == 0
    moved = kept.model_copy(
        update={"next_fire_at": T0 + 5 * MINUTE, "next_run_at": T0 + 5 * MINUTE}
    )
    rescheduled = await store.update_task(moved, 2, reschedule=True)
    assert rescheduled.next_run_at == T0 + 5 * MINUTE
    assert await store.claim_due(T0 + 4 * MINUTE, 10, REPLICA) == []
    assert (await claim_one(store, T0 + 5 * MINUTE)).scheduled_for == T0 + 5 * MINUTE


async def test_delete_keeps_the_runs_readable(store: TaskStore) -> None:
    task = await store.create_task(make_task())
    run = await claim_one(store, T0)
    await store.delete_task(task.id)
    with pytest.raises(TaskNotFound):
        await store.get_task(task.id)
    assert await store.get_run(run.id) == run
    assert await store.list_runs(task.id, None, None, 10) == [run]
    assert await store.claim_due(T0 + MINUTE, 10, REPLICA) == []
    finished = await finish_one(store, run.id, succeeded())
    assert finished.status is RunStatus.SUCCEEDED


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


# -- finishing, cancelling, sweeping ----------------------------------------------------


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


async def test_next_due_at_is_the_earliest_enabled(store: TaskStore) -> None:
    assert await store.next_due_at() is None
    await store.create_task(make_task(now=T0 + 20 * SECOND))
    await store.create_task(make_task(now=T0 + 10 * SECOND))
    await store.create_task(make_task(now=T0, enabled=False))
    assert await store.next_due_at() == T0 + 10 * SECOND


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


# -- notifications ----------------------------------------------------------------------


async def test_mutations_and_cancel_requests_wake_the_engines(
    backend: Backend, store: TaskStore
) -> None:
    wakers = [await backend.new_waker() for _ in range(2)]
    try:
        for waker in wakers:
            await waker.start()
        task = await store.create_task(make_task())
        for waker in wakers:
            await asyncio.wait_for(waker.wait(), 5)
        run = await claim_one(store, T0)
        await store.request_cancel(run.id)
        for waker in wakers:
            await asyncio.wait_for(waker.wait(), 5)
        await store.update_task(task.model_copy(update={"description": "d"}), 1, reschedule=False)
        for waker in wakers:
            await asyncio.wait_for(waker.wait(), 5)
    finally:
        for waker in wakers:
            await waker.close()
