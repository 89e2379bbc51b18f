"""A task switching to a calendar while that calendar changes: the two writes take their
locks in one order (the calendar row first, then task rows), so they never deadlock
(which answered 503) and the calendar's re-plan never meets a task that left it."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import date, timedelta
from typing import Any
from uuid import uuid4

import pytest

from application.ports import TaskUpdate
from domain.calendars import CalendarRef, StoredCalendar
from domain.errors import VersionConflict
from domain.triggers import CronTrigger
from tests.adapters.postgres.support import T0
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task

pytestmark = pytest.mark.postgres
ROUNDS = 60


def daily(calendar: str, hour: int = 9) -> CronTrigger:
    return CronTrigger(expression=f"0 {hour} * * *", calendar=CalendarRef(name=calendar))


async def test_a_task_switching_to_a_calendar_that_changes_never_deadlocks(
    postgres_backend: PostgresBackend,
) -> None:
    tasks_side = await postgres_backend.new_store()
    calendar_side = await postgres_backend.new_store()
    stored = {}
    for name in ("x", "y"):
        stored[name] = await tasks_side.create_calendar(
            StoredCalendar(id=uuid4(), name=name, created_at=T0, updated_at=T0)
        )
    staying = [await tasks_side.create_task(make_task(daily("x"), due=None)) for _ in range(4)]
    mover = await tasks_side.create_task(make_task(daily("y"), due=None))
    calendar = stored["x"]
    conflicts = 0
    for round_ in range(ROUNDS):
        # The mover goes to x (alone, or in an apply beside a task that stays on x),
        # and back to y, while x changes and re-plans whatever names it.
        target = "x" if round_ % 2 == 0 else "y"
        moved = mover.model_copy(
            update={
                "trigger": daily(target, hour=round_ % 24),
                "version": mover.version + 1,
                "updated_at": T0 + timedelta(seconds=round_),
            }
        )
        changed = calendar.model_copy(
            update={
                "dates": (date(2026, 3, 3 + round_ % 20),),
                "updated_at": T0 + timedelta(seconds=round_),
            }
        )
        move: Coroutine[Any, Any, object]
        if round_ % 4 < 2:
            move = tasks_side.update_task(moved, mover.version, reschedule=False)
        else:
            beside = staying[0]
            again = beside.model_copy(
                update={"description": f"round {round_}", "version": beside.version + 1}
            )
            move = tasks_side.apply_tasks(
                [],
                [TaskUpdate(again, beside.version, False), TaskUpdate(moved, mover.version, False)],
                [],
                at=T0,
            )
        moving, changing = await asyncio.gather(
            move, calendar_side.update_calendar(changed, calendar.version), return_exceptions=True
        )
        # Whichever commits first, both end well: the re-plan bumps the versions of the
        # tasks naming x, so a move that comes second may be a version conflict (a 412),
        # never a deadlock (StoreUnavailable, a 503).
        moved_ok = not isinstance(moving, BaseException)
        assert moved_ok or isinstance(moving, VersionConflict), moving
        assert isinstance(changing, tuple), changing
        calendar, replanned = changing
        assert replanned in (len(staying), len(staying) + 1)
        mover = await tasks_side.get_task(mover.id)
        staying[0] = await tasks_side.get_task(staying[0].id)
        conflicts += not moved_ok
        if moved_ok:
            assert mover.trigger.calendar_ref() == CalendarRef(name=target)
    assert conflicts < ROUNDS  # the moves did happen
    # The mover names x at the end when the last round's move to y lost to a conflict.
    on_x = [t.name for t in staying]
    if mover.trigger.calendar_ref() == CalendarRef(name="x"):
        on_x.append(mover.name)
    assert sorted(await tasks_side.calendar_tasks("x")) == sorted(on_x)
