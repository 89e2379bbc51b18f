"""The outcome rule (domain.outcomes): how a finished run's fields are set and how a
batch of finished runs counts on its tasks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest

from domain.outcomes import TaskCount, check_outcome, count_outcome, count_outcomes, finished
from domain.runs import Run, RunOutcome, RunStatus

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
S, F, C = RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED


def running(task_id: UUID | None = None, *, manual: bool = False) -> Run:
    return Run(
        id=uuid4(),
        task_id=task_id or uuid4(),
        scheduled_for=T0,
        claimed_at=T0,
        started_at=T0,
        lease_expires_at=T0 + 60 * SECOND,
        status=RunStatus.RUNNING,
        manual=manual,
        replica="r",
    )


def count(failures: int = 0, limit: int | None = 3, *, enabled: bool = True) -> TaskCount:
    return TaskCount(
        enabled=enabled,
        consecutive_failures=failures,
        failing=failures > 0,
        pause_after_failures=limit,
        next_fire_at=T0 + 60 * SECOND,
        next_run_at=T0 + 61 * SECOND,
        updated_at=T0,
        version=4,
    )


def ended(run: Run, status: RunStatus, at: datetime = T0 + SECOND) -> Run:
    return finished(run, RunOutcome(status=status, attempts=1, finished_at=at))


def test_finished_takes_the_outcome_and_keeps_started_at_unless_told() -> None:
    run = running()
    kept = finished(
        run,
        RunOutcome(
            status=F, attempts=2, http_status=500, error="HTTP 500", finished_at=T0 + 5 * SECOND
        ),
    )
    assert (kept.status, kept.attempts, kept.http_status, kept.error) == (F, 2, 500, "HTTP 500")
    assert (kept.started_at, kept.finished_at) == (T0, T0 + 5 * SECOND)
    assert kept.lease_expires_at == run.lease_expires_at
    told = finished(run, RunOutcome(status=S, started_at=T0 + SECOND, finished_at=T0 + 2 * SECOND))
    assert told.started_at == T0 + SECOND


def test_a_running_outcome_is_refused() -> None:
    with pytest.raises(ValueError, match="running"):
        check_outcome(RunOutcome(status=RunStatus.RUNNING, finished_at=T0))


def test_success_resets_failure_adds_others_count_nothing() -> None:
    run = running()
    assert count_outcome(count(2), ended(run, S)).consecutive_failures == 0
    assert count_outcome(count(1), ended(run, F)).consecutive_failures == 2
    for status in (C, RunStatus.MISSED, RunStatus.SKIPPED):
        assert count_outcome(count(1), ended(run, status)) == count(1)
    assert count_outcome(count(1), ended(running(manual=True), F)) == count(1)


def test_reaching_the_limit_pauses_at_the_runs_finish() -> None:
    paused = count_outcome(count(2), ended(running(), F, T0 + 9 * SECOND))
    assert (paused.enabled, paused.consecutive_failures, paused.paused) == (False, 3, True)
    assert (paused.next_fire_at, paused.next_run_at) == (None, None)
    assert (paused.version, paused.updated_at) == (5, T0 + 9 * SECOND)
    # A disabled task, or one without a limit, only counts.
    assert count_outcome(count(2, enabled=False), ended(running(), F)).enabled is False
    assert count_outcome(count(2, enabled=False), ended(running(), F)).paused is False
    assert count_outcome(count(7, None), ended(running(), F)).paused is False


def test_a_batch_counts_in_order_and_returns_only_changes() -> None:
    a, b, c = uuid4(), uuid4(), uuid4()
    before = {a: count(0, 2), b: count(0), c: count(0)}
    batch = [
        ended(running(a), F),
        ended(running(b), S),
        ended(running(a), F),
        ended(running(a), S),
        ended(running(uuid4()), F),
    ]
    after = count_outcomes(before, batch)
    assert set(after) == {a}  # b succeeded on zero, c had no run, the stranger is ignored
    assert (after[a].consecutive_failures, after[a].enabled, after[a].paused) == (0, False, True)
