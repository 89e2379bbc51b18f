"""catch_up "all": a backlog as runs of their own, the rest folded into one missed run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest
from pydantic import ValidationError

from domain.claims import BEYOND_CATCH_UP, NOT_CALLED, claim, new_run
from domain.runs import RunStatus
from domain.tasks import Task, TaskSpec
from domain.triggers import CronTrigger, IntervalTrigger, Trigger
from tests.fixtures.tasks import make_task

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
TASK_ID = UUID("6f1c0c4e-0000-4000-8000-000000000002")
RUNNING, MISSED = RunStatus.RUNNING, RunStatus.MISSED


def due_task(trigger: Trigger, *, grace: int | None, max_catch_up: int = 100) -> Task:
    """A task catching up all occurrences, due at T0 and claimed later."""
    return make_task(
        trigger,
        now=T0,
        due=T0,
        id=TASK_ID,
        name="t",
        misfire_grace_seconds=grace,
        catch_up="all",
        max_catch_up=max_catch_up,
    )


def runs_of(task: Task, now: datetime) -> list[tuple[RunStatus, datetime, int]]:
    decision = claim(task, now)
    assert decision is not None
    earlier = [(r.status, r.scheduled_for, r.coalesced) for r in decision.earlier]
    return [*earlier, (decision.status, decision.scheduled_for, decision.coalesced)]


TRIGGERS: list[Trigger] = [
    CronTrigger(expression="* * * * *"),
    IntervalTrigger(every=60, anchor=T0),
]


@pytest.mark.parametrize("trigger", TRIGGERS, ids=["cron", "interval"])
class TestCatchUpAll:
    def test_every_occurrence_within_the_grace_runs_oldest_first(self, trigger: Trigger) -> None:
        # 12:00 … 12:05 due at 12:05:10; a grace of 10 min covers them all.
        runs = runs_of(due_task(trigger, grace=600), T0 + 5 * MINUTE + timedelta(seconds=10))
        assert runs == [(RUNNING, T0 + i * MINUTE, 1) for i in range(6)]

    def test_older_ones_past_the_grace_fold_into_one_missed_run(self, trigger: Trigger) -> None:
        # At 12:05:10 with 150 s of grace: 12:03, 12:04, 12:05 are within it.
        runs = runs_of(due_task(trigger, grace=150), T0 + 5 * MINUTE + timedelta(seconds=10))
        assert runs == [
            (MISSED, T0 + 2 * MINUTE, 3),
            (RUNNING, T0 + 3 * MINUTE, 1),
            (RUNNING, T0 + 4 * MINUTE, 1),
            (RUNNING, T0 + 5 * MINUTE, 1),
        ]

    def test_at_most_max_catch_up_runs_the_older_fold(self, trigger: Trigger) -> None:
        task = due_task(trigger, grace=None, max_catch_up=2)
        runs = runs_of(task, T0 + 5 * MINUTE)
        assert runs == [
            (MISSED, T0 + 3 * MINUTE, 4),
            (RUNNING, T0 + 4 * MINUTE, 1),
            (RUNNING, T0 + 5 * MINUTE, 1),
        ]

    def test_a_folded_run_says_why_it_was_not_called(self, trigger: Trigger) -> None:
        # Beyond max_catch_up (and well within the grace): the limit is the reason.
        beyond = claim(due_task(trigger, grace=3600, max_catch_up=2), T0 + 5 * MINUTE)
        assert beyond is not None
        assert [e.error for e in beyond.earlier] == [BEYOND_CATCH_UP.format(limit=2), None]
        run = new_run(
            due_task(trigger, grace=3600), T0, "r", MISSED, T0, 4, error=beyond.earlier[0].error
        )
        assert run.error == (
            "older than the newest max_catch_up = 2 occurrences of the catch-up; not called"
        )
        # The newest folded one past the grace: the grace is the reason (NOT_CALLED).
        late = claim(due_task(trigger, grace=150), T0 + 5 * MINUTE + timedelta(seconds=10))
        assert late is not None and late.earlier[0].error is None
        assert (
            new_run(due_task(trigger, grace=150), T0, "r", MISSED, T0, 3).error
            == (NOT_CALLED[MISSED])
        )

    def test_the_latest_past_the_grace_folds_everything_as_latest_does(
        self, trigger: Trigger
    ) -> None:
        runs = runs_of(due_task(trigger, grace=5), T0 + 5 * MINUTE + timedelta(seconds=10))
        assert runs == [(MISSED, T0 + 5 * MINUTE, 6)]

    def test_one_due_occurrence_is_one_run(self, trigger: Trigger) -> None:
        assert runs_of(due_task(trigger, grace=60), T0) == [(RUNNING, T0, 1)]


def test_latest_stays_the_default_and_folds() -> None:
    task = due_task(TRIGGERS[0], grace=None).model_copy(update={"catch_up": "latest"})
    decision = claim(task, T0 + 5 * MINUTE)
    assert decision is not None
    assert (decision.coalesced, decision.earlier) == (6, ())


def spec(**fields: object) -> dict[str, object]:
    return {
        "name": "t",
        "trigger": {"kind": "cron", "expression": "* * * * *"},
        "target": {"url": "http://127.0.0.1:9/"},
        **fields,
    }


def test_policy_defaults() -> None:
    task = TaskSpec.model_validate(spec())
    assert (task.catch_up, task.max_catch_up, task.overlap) == ("latest", 100, "skip")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"catch_up": "some"}, "catch_up"),
        ({"max_catch_up": 0}, "max_catch_up"),
        ({"max_catch_up": 10_001}, "max_catch_up"),
        ({"overlap": "queue"}, "overlap"),
    ],
)
def test_bad_policies_name_their_field(fields: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        TaskSpec.model_validate(spec(**fields))
    assert [error["loc"][0] for error in caught.value.errors()] == [field]
