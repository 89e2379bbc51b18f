"""The CalendarStore contract (docs/api.md, "Calendars"): every store passes it. A
calendar change re-plans the tasks naming it in its transaction, with a history version
(cause calendar) and a wake-up; a task cannot name a calendar that is not stored, nor
can a calendar go while a task names it; the claim path fires by the calendar as it is."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest

from application.calendars import SchedulerStore
from application.ports import TaskUpdate
from domain.calendars import CalendarRef, StoredCalendar
from domain.claims import run_instant, scheduled
from domain.errors import (
    CalendarInUse,
    CalendarNotFound,
    CalendarVersionConflict,
    DuplicateCalendarName,
    InvalidRequest,
)
from domain.history import ChangeCause
from domain.runs import RunStatus
from domain.tasks import Task
from domain.triggers import CronTrigger
from tests.adapters.contract_support import REPLICA, T0
from tests.fixtures.backends import Backend
from tests.fixtures.tasks import make_task

DAY = timedelta(days=1)
# T0 is Monday 2026-03-02 12:00 UTC; this fires at 09:00 every day.
DAILY = CronTrigger(expression="0 9 * * *", calendar=CalendarRef(name="closures"))


def calendar(name: str = "closures", *, at: datetime = T0, **fields: Any) -> StoredCalendar:
    return StoredCalendar(id=uuid4(), name=name, created_at=at, updated_at=at, **fields)


@pytest.fixture
async def store(backend: Backend) -> SchedulerStore:
    store: SchedulerStore = await backend.new_store()  # type: ignore[assignment]
    return store


def daily_task(store_calendar: StoredCalendar, **fields: Any) -> Task:
    """A task firing at 09:00 daily around `store_calendar`, planned as the use cases do."""
    task = make_task(DAILY, **{"enabled": False, **fields})
    enabled = fields.get("enabled", True)
    planned = task.model_copy(update={"enabled": enabled})
    return scheduled(planned, T0, calendars={store_calendar.name: store_calendar})


async def test_calendars_are_created_read_and_listed_by_name(store: SchedulerStore) -> None:
    first = await store.create_calendar(calendar("b-days", dates=(date(2026, 12, 25),)))
    await store.create_calendar(calendar("a-days", weekdays=("SAT", "SUN"), yearly=("01-01",)))
    assert first.version == 1
    assert await store.get_calendar("b-days") == first
    assert await store.get_calendar_by_id(first.id) == first
    assert [c.name for c in await store.list_calendars(None, 10)] == ["a-days", "b-days"]
    assert [c.name for c in await store.list_calendars("a-days", 10)] == ["b-days"]
    assert [c.name for c in await store.list_calendars(None, 1)] == ["a-days"]
    assert set(await store.calendars_named(["a-days", "nope"])) == {"a-days"}
    with pytest.raises(DuplicateCalendarName):
        await store.create_calendar(calendar("b-days"))
    with pytest.raises(CalendarNotFound):
        await store.get_calendar("nope")
    with pytest.raises(CalendarNotFound):
        await store.get_calendar_by_id(uuid4())


async def test_a_task_cannot_name_a_calendar_that_is_not_stored(store: SchedulerStore) -> None:
    task = make_task(DAILY, enabled=False)  # paused: planned without the calendar
    with pytest.raises(InvalidRequest) as raised:
        await store.create_task(task)
    assert raised.value.field == "trigger.calendar.name"
    with pytest.raises(InvalidRequest):
        await store.apply_tasks([task], [], [], at=T0)
    assert await store.calendar_tasks("closures") == []
    plain = await store.create_task(make_task(name="plain"))
    named = plain.model_copy(update={"trigger": DAILY})
    with pytest.raises(InvalidRequest):
        await store.update_task(named, 1, reschedule=True)
    assert (await store.get_task(plain.id)).version == 1  # nothing written


async def test_a_calendar_named_by_a_task_is_not_deleted(store: SchedulerStore) -> None:
    closures = await store.create_calendar(calendar())
    task = await store.create_task(daily_task(closures, name="payroll"))
    assert await store.calendar_tasks("closures") == ["payroll"]
    with pytest.raises(CalendarInUse) as raised:
        await store.delete_calendar("closures")
    assert raised.value.tasks == ["payroll"]
    assert await store.get_calendar("closures") == closures
    with pytest.raises(CalendarVersionConflict):
        await store.delete_calendar("closures", expected_version=7)
    # Once no task names it (the trigger changed), it goes.
    unnamed = task.model_copy(update={"trigger": CronTrigger(expression="0 9 * * *")})
    await store.update_task(unnamed, 1, reschedule=False)
    assert await store.calendar_tasks("closures") == []
    await store.delete_calendar("closures", expected_version=1)
    with pytest.raises(CalendarNotFound):
        await store.get_calendar("closures")
    with pytest.raises(CalendarNotFound):
        await store.delete_calendar("closures")


async def test_deleting_a_task_frees_its_calendar(store: SchedulerStore) -> None:
    closures = await store.create_calendar(calendar())
    task = await store.create_task(daily_task(closures))
    with pytest.raises(CalendarInUse):
        await store.delete_calendar("closures")
    await store.delete_task(task.id, at=T0)
    await store.delete_calendar("closures")
    with pytest.raises(CalendarNotFound):
        await store.get_calendar("closures")


async def test_a_change_replans_every_task_naming_it_with_a_history_version(
    backend: Backend, store: SchedulerStore
) -> None:
    closures = await store.create_calendar(calendar())
    # One search serves tasks sharing a trigger; each keeps its own jitter.
    naming = [await store.create_task(daily_task(closures, jitter_seconds=j)) for j in (0, 0, 600)]
    paused = await store.create_task(daily_task(closures, enabled=False))
    other = await store.create_task(make_task(CronTrigger(expression="0 9 * * *")))
    assert naming[0].next_fire_at == datetime(2026, 3, 3, 9, tzinfo=UTC)
    waker = await backend.new_waker()
    try:
        await waker.start()
        changed_at = T0 + timedelta(minutes=5)
        # Tuesday closes: the next 09:00 is Wednesday's.
        wanted = closures.model_copy(
            update={"dates": (date(2026, 3, 3),), "updated_at": changed_at}
        )
        stored, replanned = await store.update_calendar(wanted, 1, actor="ops")
        await asyncio.wait_for(waker.wait(), 5)
    finally:
        await waker.close()
    assert (stored.version, stored.dates, stored.updated_at) == (2, (date(2026, 3, 3),), changed_at)
    assert stored.created_at == T0 and stored.id == closures.id
    assert replanned == 4
    assert await store.get_calendar("closures") == stored
    for task in naming:
        now = await store.get_task(task.id)
        assert now.next_fire_at == datetime(2026, 3, 4, 9, tzinfo=UTC)
        assert now.next_run_at == run_instant(now, now.next_fire_at)
        assert (now.version, now.updated_at) == (2, changed_at)
        [version, _] = await store.task_history(task.id, None, 10)
        assert (version.version, version.cause, version.actor) == (2, ChangeCause.CALENDAR, "ops")
        assert version.changes == {
            "calendar": (1, 2),
            "next_fire_at": ("2026-03-03T09:00:00Z", "2026-03-04T09:00:00Z"),
        }
        assert version.state == task.spec().model_dump(mode="json")
    still_paused = await store.get_task(paused.id)
    assert (still_paused.next_fire_at, still_paused.version) == (None, 2)
    assert await store.get_task(other.id) == other
    with pytest.raises(CalendarVersionConflict):
        await store.update_calendar(wanted, 1)
    with pytest.raises(CalendarNotFound):
        await store.update_calendar(calendar("nope"), 1)


async def test_a_change_that_frees_a_date_brings_the_next_occurrence_closer(
    store: SchedulerStore,
) -> None:
    closures = await store.create_calendar(calendar(dates=(date(2026, 3, 3),)))
    task = await store.create_task(daily_task(closures))
    assert task.next_fire_at == datetime(2026, 3, 4, 9, tzinfo=UTC)
    await store.update_calendar(closures.model_copy(update={"dates": ()}), 1)
    assert (await store.get_task(task.id)).next_fire_at == datetime(2026, 3, 3, 9, tzinfo=UTC)


async def test_claims_follow_the_calendar_as_it_is_now(backend: Backend) -> None:
    """Two replicas: one claims (and keeps the calendar it read), the other changes the
    calendar; the first one's next claim fires by the new version."""
    first: SchedulerStore = await backend.new_store()  # type: ignore[assignment]
    second: SchedulerStore = await backend.new_store()  # type: ignore[assignment]
    closures = await first.create_calendar(calendar(dates=(date(2026, 3, 4),)))
    task = await first.create_task(daily_task(closures))
    tuesday = datetime(2026, 3, 3, 9, tzinfo=UTC)
    [claimed] = await first.claim_due(tuesday, 10, REPLICA)
    assert claimed.run.scheduled_for == tuesday
    # Wednesday is closed: the claim planned Thursday.
    assert (await first.get_task(task.id)).next_fire_at == datetime(2026, 3, 5, 9, tzinfo=UTC)
    current = await second.get_calendar("closures")
    changed = {"dates": (date(2026, 3, 6),), "updated_at": tuesday + timedelta(hours=1)}
    await second.update_calendar(current.model_copy(update=changed), 1)
    # Wednesday is open again: re-planned to it; Friday is closed now.
    wednesday = datetime(2026, 3, 4, 9, tzinfo=UTC)
    assert (await first.get_task(task.id)).next_fire_at == wednesday
    [claimed] = await first.claim_due(wednesday, 10, REPLICA)
    assert claimed.run.scheduled_for == wednesday
    thursday = datetime(2026, 3, 5, 9, tzinfo=UTC)
    [claimed] = await first.claim_due(thursday, 10, REPLICA)
    assert (await first.get_task(task.id)).next_fire_at == datetime(2026, 3, 7, 9, tzinfo=UTC)


async def test_a_change_in_the_second_of_a_fire_time_does_not_plan_it_again(
    store: SchedulerStore,
) -> None:
    closures = await store.create_calendar(calendar())
    task = await store.create_task(daily_task(closures))
    tuesday = datetime(2026, 3, 3, 9, tzinfo=UTC)
    [_claimed] = await store.claim_due(tuesday, 10, REPLICA)
    await store.update_calendar(closures.model_copy(update={"updated_at": tuesday}), 1)
    assert (await store.get_task(task.id)).next_fire_at == tuesday + DAY


async def test_a_due_occurrence_not_claimed_yet_stays_due(store: SchedulerStore) -> None:
    closures = await store.create_calendar(calendar())
    task = await store.create_task(daily_task(closures))
    late = datetime(2026, 3, 3, 9, 30, tzinfo=UTC)  # Tuesday's 09:00 is due, unclaimed
    await store.update_calendar(closures.model_copy(update={"updated_at": late}), 1)
    assert (await store.get_task(task.id)).next_fire_at == datetime(2026, 3, 3, 9, tzinfo=UTC)
    closed = {"dates": (date(2026, 3, 3),), "updated_at": late}
    await store.update_calendar(closures.model_copy(update=closed), 2)
    assert (await store.get_task(task.id)).next_fire_at == datetime(2026, 3, 4, 9, tzinfo=UTC)


async def test_a_run_claimed_by_a_replica_whose_clock_is_ahead_is_not_planned_again(
    store: SchedulerStore,
) -> None:
    closures = await store.create_calendar(calendar())
    task = await store.create_task(daily_task(closures))
    tuesday = datetime(2026, 3, 3, 9, tzinfo=UTC)
    await store.claim_due(tuesday + timedelta(seconds=2), 10, REPLICA)  # its clock: +2 s
    # Our clock reads a second before the occurrence; the calendar frees nothing new.
    behind = closures.model_copy(update={"updated_at": tuesday - timedelta(seconds=1)})
    await store.update_calendar(behind, 1)
    assert (await store.get_task(task.id)).next_fire_at == tuesday + DAY


async def test_a_skipped_claim_by_a_replica_whose_clock_is_ahead_is_not_planned_again(
    store: SchedulerStore,
) -> None:
    # Skipped, it set no last run: the latest occurrence claimed is what holds it.
    closures = await store.create_calendar(calendar())
    task = await store.create_task(daily_task(closures))
    tuesday = datetime(2026, 3, 3, 9, tzinfo=UTC)
    await store.start_manual_run(task.id, tuesday, REPLICA)  # holds the one slot
    [claimed] = await store.claim_due(tuesday + timedelta(seconds=2), 10, REPLICA)
    assert claimed.run.status is RunStatus.SKIPPED
    behind = closures.model_copy(update={"updated_at": tuesday - timedelta(seconds=1)})
    await store.update_calendar(behind, 1)
    assert (await store.get_task(task.id)).next_fire_at == tuesday + DAY


async def test_apply_writes_which_calendar_each_task_names(store: SchedulerStore) -> None:
    closures = await store.create_calendar(calendar())
    created = daily_task(closures, name="one")
    await store.apply_tasks([created], [], [], at=T0)
    assert await store.calendar_tasks("closures") == ["one"]
    stored = await store.get_task_by_name("one")
    unnamed = stored.model_copy(update={"trigger": CronTrigger(expression="0 9 * * *")})
    await store.apply_tasks([], [TaskUpdate(unnamed, 1, True)], [], at=T0)
    assert await store.calendar_tasks("closures") == []
