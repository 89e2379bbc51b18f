"""The engine contract for calendars (docs/triggers.md, "Calendars"): both engines, on
every store, fire a task by the calendar it names and re-plan it when the calendar
changes."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any
from uuid import uuid4

from domain.calendars import CalendarRef, StoredCalendar
from domain.claims import scheduled
from domain.runs import RunStatus
from domain.triggers import CronTrigger
from tests.fixtures.cluster import SECOND, T0, Cluster, statuses
from tests.fixtures.cluster import cluster as cluster  # fixtures
from tests.fixtures.cluster import engine_factory as engine_factory
from tests.fixtures.cluster import http_executor as http_executor
from tests.fixtures.target import RecordingTarget
from tests.fixtures.tasks import make_task


async def test_a_task_naming_a_calendar_fires_by_it_and_follows_its_changes(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    """Both engines: the claim path (and APScheduler's schedule) reads the calendar, and
    a change of it re-plans the task at once (T0 is Monday 2026-03-02, 12:00 UTC)."""
    day = timedelta(days=1)
    store: Any = cluster.store
    closures = await store.create_calendar(
        StoredCalendar(
            id=uuid4(), name="closures", dates=(date(2026, 3, 3),), created_at=T0, updated_at=T0
        )
    )
    trigger = CronTrigger(expression="0 12 * * *", calendar=CalendarRef(name="closures"))
    paused = make_task(trigger, url=recording_target.url("/closures"), enabled=False)
    planned = scheduled(
        paused.model_copy(update={"enabled": True}), T0 - SECOND, calendars={"closures": closures}
    )
    task = await cluster.add(planned)
    engine = await cluster.engine()
    await cluster.advance_to(T0, engine)
    await cluster.wait_runs(task, 1)
    assert (await cluster.store.get_task(task.id)).next_run_at == T0 + 2 * day  # not Tuesday
    await cluster.advance_to(T0 + day, engine)
    assert len(await cluster.runs(task)) == 1
    # Thursday closes too, from Tuesday afternoon on.
    changed = {"dates": (date(2026, 3, 3), date(2026, 3, 5)), "updated_at": T0 + day}
    await store.update_calendar(closures.model_copy(update=changed), 1)
    await cluster.advance_to(T0 + 2 * day, engine)
    await cluster.wait_runs(task, 2)
    await cluster.advance_to(T0 + 3 * day, engine)
    assert len(await cluster.runs(task)) == 2
    await cluster.advance_to(T0 + 4 * day, engine)
    runs = await cluster.wait_runs(task, 3)
    assert sorted(r.scheduled_for for r in runs) == [T0, T0 + 2 * day, T0 + 4 * day]
    assert set(statuses(runs)) == {RunStatus.SUCCEEDED}
