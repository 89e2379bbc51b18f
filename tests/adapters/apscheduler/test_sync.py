"""`plan()`: what a resync changes, for each way a row and its schedule can differ."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from tests.adapters.apscheduler.support import require_apscheduler

require_apscheduler()

from apscheduler import Schedule  # noqa: E402

from adapters.apscheduler.sync import EXECUTE, VERSION_KEY, plan, schedule_trigger  # noqa: E402
from domain.claims import run_instant  # noqa: E402
from domain.tasks import HttpTarget, Task  # noqa: E402
from domain.triggers import IntervalTrigger  # noqa: E402

T0 = datetime(2026, 3, 2, 12, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
SHIFT = timedelta(days=272, milliseconds=5)
TASK_ID = UUID("6f1c0000-0000-4000-8000-000000000002")


def row(**fields: Any) -> Task:
    values: dict[str, Any] = {
        "id": TASK_ID,
        "name": "every-minute",
        "trigger": IntervalTrigger(every=60, anchor=T0),
        "target": HttpTarget(url="http://127.0.0.1:9/"),
        "created_at": T0,
        "updated_at": T0,
        "next_fire_at": T0,
        "next_run_at": T0,
        "version": 3,
    }
    return Task(**(values | fields))


def schedule(task: Task, *, shift: timedelta = SHIFT, **fields: Any) -> Schedule:
    """The schedule a resync arms for `task`, as APScheduler stores it."""
    trigger = schedule_trigger(task, shift)
    values: dict[str, Any] = {
        "id": str(task.id),
        "task_id": EXECUTE,
        "trigger": trigger,
        "kwargs": {"task_id": str(task.id)},
        "job_executor": "async",
        "metadata": {VERSION_KEY: task.version},
        "next_fire_time": trigger.next(),
    }
    return Schedule(**(values | fields))


CURRENT = row()
SPENT = row(next_fire_at=None, next_run_at=None)
FIRED: dict[str, Any] = {"next_fire_time": T0 + MINUTE + SHIFT, "last_fire_time": T0 + SHIFT}


@pytest.mark.parametrize(
    ("task", "existing", "expected"),
    [
        pytest.param(CURRENT, None, "arm", id="new-task"),
        pytest.param(CURRENT, schedule(CURRENT), None, id="in-step"),
        pytest.param(CURRENT, schedule(CURRENT, **FIRED), None, id="fired-claim-pending"),
        pytest.param(
            row(next_fire_at=T0 + MINUTE, next_run_at=T0 + MINUTE),
            schedule(CURRENT, **FIRED),
            None,
            id="fired-and-claimed",
        ),
        pytest.param(
            row(next_fire_at=T0 + 2 * MINUTE, next_run_at=T0 + 2 * MINUTE),
            schedule(CURRENT),
            "arm",
            id="claimed-elsewhere",
        ),
        pytest.param(row(version=4), schedule(CURRENT), "arm", id="changed"),
        pytest.param(CURRENT, schedule(CURRENT, shift=timedelta(0)), "arm", id="clock-jumped"),
        pytest.param(CURRENT, schedule(CURRENT, paused=True), "arm", id="resumed"),
        pytest.param(row(enabled=False), schedule(CURRENT), "pause", id="paused"),
        pytest.param(row(enabled=False), schedule(CURRENT, paused=True), None, id="still-paused"),
        pytest.param(row(enabled=False), None, None, id="created-paused"),
        pytest.param(SPENT, schedule(CURRENT), "remove", id="spent"),
        pytest.param(SPENT, None, None, id="spent-gone"),
    ],
)
def test_plan(task: Task, existing: Schedule | None, expected: str | None) -> None:
    changes = plan([task], [] if existing is None else [existing], SHIFT)
    decided = {
        "arm": [t.id for t in changes.arm],
        "pause": changes.pause,
        "remove": changes.remove,
    }
    wanted: dict[str, list[Any]] = {key: [] for key in decided}
    if expected is not None:
        wanted[expected] = [task.id if expected == "arm" else str(task.id)]
    assert decided == wanted
    assert changes.deferred == 0


def test_a_deleted_tasks_schedule_is_removed() -> None:
    changes = plan([], [schedule(CURRENT)], SHIFT)
    assert (changes.arm, changes.pause, changes.remove) == ([], [], [str(TASK_ID)])


def test_schedules_apscheduler_is_processing_are_deferred() -> None:
    acquired: dict[str, Any] = {"acquired_by": "engine-1", "acquired_until": T0}
    changes = plan([row(version=4)], [schedule(CURRENT, **acquired)], SHIFT)
    assert (bool(changes), changes.deferred) == (False, 1)
    assert plan([], [schedule(CURRENT, **acquired)], SHIFT).deferred == 1


def test_an_armed_schedule_fires_at_the_rows_next_run_at() -> None:
    jittered = row(jitter_seconds=30, next_run_at=run_instant(row(jitter_seconds=30), T0))
    assert jittered.next_run_at is not None and jittered.next_run_at > T0
    armed = schedule(jittered)
    assert armed.next_fire_time == jittered.next_run_at + SHIFT
    assert plan([jittered], [armed], SHIFT).deferred == 0
    assert not plan([jittered], [armed], SHIFT)
