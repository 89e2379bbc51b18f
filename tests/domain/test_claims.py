"""The claim rule: fire or missed, coalescing, the next occurrence, jitter, leases."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from domain.claims import (
    claim,
    complete_trigger,
    initial_fire_at,
    jitter_offset,
    lease_duration,
    resolve_status,
    run_instant,
    scheduled,
)
from domain.runs import Run, RunStatus, idempotency_key, occurrence_key
from domain.tasks import HttpTarget, RetryPolicy, Task
from domain.triggers import CronTrigger, IntervalTrigger, OneShotTrigger, Trigger
from tests.fixtures.tasks import make_task

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)
TASK_ID = UUID("6f1c0c4e-0000-4000-8000-000000000001")


def due_task(trigger: Trigger, due: datetime | None = T0, **fields: Any) -> Task:
    """A task due at `due` (its next occurrence), as the claim path leaves it."""
    return make_task(trigger, now=T0, due=due, id=TASK_ID, name="t", **fields)


MINUTELY = CronTrigger(expression="* * * * *")
EVERY_MINUTE = IntervalTrigger(every=60, anchor=T0)


@pytest.mark.parametrize("trigger", [MINUTELY, EVERY_MINUTE], ids=["cron", "interval"])
class TestClaim:
    def test_on_time_fires_once_and_advances(self, trigger: Trigger) -> None:
        decision = claim(due_task(trigger), T0)
        assert decision is not None
        assert decision.status is RunStatus.RUNNING
        assert (decision.scheduled_for, decision.coalesced) == (T0, 1)
        assert decision.next_fire_at == decision.next_run_at == T0 + MINUTE
        assert decision.lateness == timedelta(0)

    def test_not_due_yet(self, trigger: Trigger) -> None:
        assert claim(due_task(trigger), T0 - SECOND) is None

    def test_late_within_grace_fires(self, trigger: Trigger) -> None:
        decision = claim(due_task(trigger, misfire_grace_seconds=60), T0 + timedelta(seconds=59))
        assert decision is not None
        assert decision.status is RunStatus.RUNNING
        assert decision.lateness == timedelta(seconds=59)

    def test_past_grace_is_missed(self, trigger: Trigger) -> None:
        # 30 s grace, 45 s late, and no later occurrence is due yet.
        decision = claim(due_task(trigger, misfire_grace_seconds=30), T0 + timedelta(seconds=45))
        assert decision is not None
        assert decision.status is RunStatus.MISSED
        assert decision.next_fire_at == T0 + MINUTE

    def test_null_grace_always_fires(self, trigger: Trigger) -> None:
        decision = claim(due_task(trigger, misfire_grace_seconds=None), T0 + timedelta(seconds=59))
        assert decision is not None and decision.status is RunStatus.RUNNING

    def test_downtime_coalesces_into_the_latest_occurrence(self, trigger: Trigger) -> None:
        # Down from 12:00 to 13:30:10: 91 occurrences (12:00 … 13:30) fold into one run
        # for 13:30, which is 10 s late and so within the grace.
        now = T0 + timedelta(hours=1, minutes=30, seconds=10)
        decision = claim(due_task(trigger), now)
        assert decision is not None
        assert decision.status is RunStatus.RUNNING
        assert decision.coalesced == 91
        assert decision.scheduled_for == T0 + timedelta(hours=1, minutes=30)
        assert decision.next_fire_at == T0 + timedelta(hours=1, minutes=31)

    def test_downtime_with_latest_past_grace_is_one_missed_run(self, trigger: Trigger) -> None:
        now = T0 + timedelta(hours=2, seconds=50)
        decision = claim(due_task(trigger, misfire_grace_seconds=30), now)
        assert decision is not None
        assert (decision.status, decision.coalesced) == (RunStatus.MISSED, 121)

    def test_disabled_task_is_never_claimed(self, trigger: Trigger) -> None:
        assert claim(due_task(trigger, enabled=False), T0 + timedelta(hours=1)) is None


def test_one_shot_is_exhausted_after_its_claim() -> None:
    once = OneShotTrigger(run_at=T0)
    decision = claim(due_task(once), T0 + SECOND)
    assert decision is not None
    assert (decision.scheduled_for, decision.next_fire_at, decision.next_run_at) == (
        T0,
        None,
        None,
    )
    spent = due_task(once, None)
    assert claim(spent, T0 + timedelta(days=1)) is None


def test_sub_second_claim_instant_is_truncated() -> None:
    decision = claim(due_task(MINUTELY), T0 + timedelta(microseconds=999_999))
    assert decision is not None and decision.lateness == timedelta(0)


def test_a_year_of_per_minute_downtime_coalesces_exactly_and_quickly() -> None:
    now = T0 + timedelta(days=365, seconds=5)
    decision = claim(due_task(EVERY_MINUTE, misfire_grace_seconds=None), now)
    assert decision is not None
    assert decision.coalesced == 365 * 24 * 60 + 1
    assert decision.scheduled_for == T0 + timedelta(days=365)


class TestJitter:
    def test_offset_is_deterministic_and_in_range(self) -> None:
        offsets = {jitter_offset(TASK_ID, T0 + k * MINUTE, 30) for k in range(200)}
        assert all(timedelta(0) <= o < timedelta(seconds=30) for o in offsets)
        assert len(offsets) > 10  # it spreads

    def test_every_replica_computes_the_same_offsets(self) -> None:
        # Replicas are processes: an offset from anything seeded per process (str hash,
        # random) would differ between them. Two fresh interpreters with different hash
        # seeds must agree with this one.
        script = (
            "import sys; from datetime import datetime, timedelta; from uuid import UUID;"
            "from domain.claims import jitter_offset;"
            "t0 = datetime.fromisoformat(sys.argv[2]);"
            "print([jitter_offset(UUID(sys.argv[1]), t0 + timedelta(minutes=k), 3600)"
            ".total_seconds() for k in range(50)])"
        )
        here = [jitter_offset(TASK_ID, T0 + k * MINUTE, 3600).total_seconds() for k in range(50)]
        root = str(Path(__file__).resolve().parents[2])
        for seed in ("1", "2"):
            other = subprocess.run(
                [sys.executable, "-c", script, str(TASK_ID), T0.isoformat()],
                env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": root},
                capture_output=True,
                text=True,
                check=True,
            )
            assert ast.literal_eval(other.stdout) == here

    def test_jitter_delays_the_run_but_not_scheduled_for(self) -> None:
        task = due_task(MINUTELY, jitter_seconds=30)
        offset = jitter_offset(TASK_ID, T0, 30)
        assert task.next_run_at == T0 + offset
        if offset:
            assert claim(task, T0 + offset - SECOND) is None
        decision = claim(task, T0 + offset)
        assert decision is not None
        assert decision.scheduled_for == T0
        assert decision.lateness == timedelta(0)
        next_offset = jitter_offset(TASK_ID, T0 + MINUTE, 30)
        assert decision.next_run_at == T0 + MINUTE + next_offset

    def test_other_tasks_sharing_a_schedule_spread(self) -> None:
        ids = [UUID(int=k) for k in range(50)]
        assert len({jitter_offset(i, T0, 60) for i in ids}) > 10


class TestInitialFireAt:
    def test_recent_one_shot_within_grace_fires_at_once(self) -> None:
        once = OneShotTrigger(run_at=T0)
        assert initial_fire_at(once, T0 + timedelta(seconds=30), 60) == T0

    def test_one_shot_past_grace_never_fires(self) -> None:
        once = OneShotTrigger(run_at=T0)
        assert initial_fire_at(once, T0 + timedelta(seconds=61), 60) is None

    def test_future_one_shot(self) -> None:
        once = OneShotTrigger(run_at=T0 + MINUTE)
        assert initial_fire_at(once, T0, 60) == T0 + MINUTE

    def test_fire_time_at_the_instant_counts(self) -> None:
        assert initial_fire_at(MINUTELY, T0, 60) == T0
        assert initial_fire_at(MINUTELY, T0 + SECOND, 60) == T0 + MINUTE

    def test_interval_anchored_now_is_due_now(self) -> None:
        assert initial_fire_at(IntervalTrigger(every=3600, anchor=T0), T0, 60) == T0


def test_lease_covers_every_attempt_and_wait() -> None:
    target = HttpTarget(
        url="http://127.0.0.1:9/",
        timeout_seconds=10,
        retry=RetryPolicy(max_attempts=3, backoff_seconds=1, max_backoff_seconds=20),
    )
    # 3 attempts x 10 s + 2 waits of at most 20 s + 30 s margin.
    assert lease_duration(target) == timedelta(seconds=100)


@pytest.mark.parametrize(
    ("decided", "active", "limit", "expected"),
    [
        pytest.param(RunStatus.RUNNING, 0, 1, RunStatus.RUNNING, id="free-slot"),
        pytest.param(RunStatus.RUNNING, 1, 1, RunStatus.SKIPPED, id="at-limit"),
        pytest.param(RunStatus.RUNNING, 2, 3, RunStatus.RUNNING, id="below-limit"),
        pytest.param(RunStatus.MISSED, 5, 1, RunStatus.MISSED, id="missed-stays-missed"),
    ],
)
def test_resolve_status(decided: RunStatus, active: int, limit: int, expected: RunStatus) -> None:
    assert resolve_status(decided, active, limit) is expected


def test_retry_wait_doubles_and_is_capped() -> None:
    policy = RetryPolicy(max_attempts=5, backoff_seconds=2, max_backoff_seconds=10)
    assert [policy.wait_before(n) for n in range(2, 6)] == [2, 4, 8, 10]
    assert policy.wait_before(2, retry_after=100) == 10
    assert policy.wait_before(2, retry_after=3) == 3


def test_coalescing_stops_at_the_end_bound() -> None:
    bounded = IntervalTrigger(every=60, anchor=T0, end_at=T0 + timedelta(minutes=10))
    decision = claim(due_task(bounded, misfire_grace_seconds=None), T0 + timedelta(hours=1))
    assert decision is not None
    assert decision.coalesced == 11
    assert decision.scheduled_for == T0 + timedelta(minutes=10)
    assert decision.next_fire_at is None


def test_the_idempotency_key_names_the_occurrence_or_the_manual_run() -> None:
    task_id, run_id = UUID(int=1), UUID(int=2)
    scheduled_run = Run(
        id=run_id,
        task_id=task_id,
        scheduled_for=datetime(2026, 3, 2, 12, 0, tzinfo=UTC),
        claimed_at=datetime(2026, 3, 2, 12, 0, 3, tzinfo=UTC),
        status=RunStatus.RUNNING,
        replica="r",
    )
    assert idempotency_key(scheduled_run) == f"{task_id}:1772452800"
    assert idempotency_key(scheduled_run) == occurrence_key(task_id, scheduled_run.scheduled_for)
    manual = scheduled_run.model_copy(update={"manual": True})
    assert idempotency_key(manual) == f"{task_id}:{run_id}"


def test_first_schedule_of_a_new_disabled_or_spent_task() -> None:
    every_minute = complete_trigger(IntervalTrigger(every=60), T0 + 5 * SECOND)
    assert every_minute == IntervalTrigger(every=60, anchor=T0 + 5 * SECOND)
    task = Task(
        id=TASK_ID,
        name="t",
        trigger=every_minute,
        target=HttpTarget(url="http://127.0.0.1:9/"),
        created_at=T0,
        updated_at=T0,
        jitter_seconds=30,
    )
    first = scheduled(task, T0 + 5 * SECOND)
    assert first.next_fire_at == T0 + 5 * SECOND
    assert first.next_run_at == run_instant(task, T0 + 5 * SECOND)
    disabled = scheduled(task.model_copy(update={"enabled": False}), T0)
    assert (disabled.next_fire_at, disabled.next_run_at) == (None, None)
    once = task.model_copy(
        update={"trigger": OneShotTrigger(run_at=T0 + MINUTE), "last_run_at": T0}
    )
    assert scheduled(once, T0).next_fire_at == T0 + MINUTE  # a new trigger fires
    assert scheduled(once, T0, fired_before=True).next_fire_at is None  # spent


def test_the_longest_interval_is_claimed_without_overflow() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    trigger = IntervalTrigger(every=3_155_760_000, start_at=start)
    decision = claim(
        due_task(trigger, start, misfire_grace_seconds=None), datetime(2026, 6, 1, tzinfo=UTC)
    )
    assert decision is not None and decision.status is RunStatus.RUNNING
    assert decision.next_fire_at == start + timedelta(days=36_525)
