"""A calendar change while applies hold their tasks naming it (docs/storage.md,
"Calendar turns"): it waits for the hold under way and goes before the holds that came
after it, which read the calendar as it changed. A task write that planned before its
transaction (a create, an update) does not wait for the change: it lands first and the
change re-plans it, so either way the task's plan is the calendar's new one. Before,
holds one after another could keep a change waiting past the API's answer limit (a 503
in an audit); and while every task write waited its turn, a create or update arriving
during a change landed after it with the plan of the calendar's previous version (an
audit of that version)."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime
from typing import Any
from uuid import uuid4

import pytest

from adapters.postgres.advisory import calendar_lock_key, hold_lock_key
from application.ports import HoldScope
from domain.calendars import CalendarRef, StoredCalendar
from domain.tasks import Task
from domain.triggers import CronTrigger
from tests.adapters.postgres.support import T0, query
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually

pytestmark = pytest.mark.postgres


def daily(calendar: str) -> CronTrigger:
    return CronTrigger(expression="0 9 * * *", calendar=CalendarRef(name=calendar))


@pytest.mark.parametrize("change", ["update", "delete"])
async def test_a_calendar_change_goes_before_a_hold_that_came_after_it(
    postgres_backend: PostgresBackend, change: str
) -> None:
    """A hold naming the calendar is under way; a change of the calendar waits for it;
    then another hold naming it comes: the change goes first (before, the next hold
    went first about one time in ten, and holds one after another could keep it
    waiting)."""
    first, calendars, second = [await postgres_backend.new_store() for _ in range(3)]
    calendar = await first.create_calendar(
        StoredCalendar(id=uuid4(), name="holidays", created_at=T0, updated_at=T0)
    )
    naming = HoldScope(frozenset({"nightly"}), calendars=frozenset({"holidays"}))

    async def change_calendar() -> None:
        if change == "update":
            changed = calendar.model_copy(update={"dates": (date(2026, 12, 25),)})
            await calendars.update_calendar(changed, calendar.version)
        else:
            await calendars.delete_calendar(calendar.name)

    async def hold_next() -> dict[str, StoredCalendar]:
        async with second.hold_tasks(naming) as hold:
            # What the hold plans with, read in its transaction after its locks.
            read = await hold.calendars_named({"holidays"})
            # Kept until the change is in, or a while: a change waiting for this
            # hold's key share would not end before it.
            await asyncio.wait_for(asyncio.shield(changing), 2)
            return read

    async with first.hold_tasks(naming):
        changing = asyncio.create_task(change_calendar())
        await wait_for_waiters(postgres_backend, 1)
        holding = asyncio.create_task(hold_next())
        await wait_for_waiters(postgres_backend, 2)

    await changing
    read = await holding  # the change was in before the hold read
    if change == "update":
        assert read["holidays"].version == calendar.version + 1
        assert read["holidays"].dates == (date(2026, 12, 25),)
    else:
        assert read == {}


@pytest.mark.parametrize("write", ["create", "update"])
async def test_a_task_written_while_its_calendar_changes_gets_the_new_plan(
    postgres_backend: PostgresBackend, write: str
) -> None:
    """A task planned with the calendar as it was (no date left out) is written while
    a change that leaves out the day of its next fire time waits for a hold under way:
    once both are in, the task's next fire time is on another day."""
    first, calendars, second = [await postgres_backend.new_store() for _ in range(3)]
    calendar = await first.create_calendar(
        StoredCalendar(id=uuid4(), name="holidays", created_at=T0, updated_at=T0)
    )
    # Planned with no date left out: 09:00 UTC on the day after T0.
    first_fire = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
    planned = make_task(daily("holidays"), due=first_fire)
    day = first_fire.date()
    before = await first.create_task(make_task(name="moving")) if write == "update" else None
    changed = calendar.model_copy(update={"dates": (day,), "updated_at": T0})

    async def write_task() -> Task:
        if before is None:
            return await second.create_task(planned)
        moved = planned.model_copy(
            update={"id": before.id, "name": before.name, "version": before.version + 1}
        )
        return await second.update_task(moved, before.version, reschedule=True)

    naming = HoldScope(frozenset({"nightly"}), calendars=frozenset({"holidays"}))
    async with first.hold_tasks(naming):
        changing = asyncio.create_task(calendars.update_calendar(changed, calendar.version))
        await wait_for_waiters(postgres_backend, 1)
        writing = asyncio.create_task(write_task())
        await wait_for_waiters(postgres_backend, 2, or_done=writing)

    _, written = await asyncio.gather(changing, writing)
    stored = await first.get_task(written.id)
    assert stored.next_fire_at is not None
    assert stored.next_fire_at.date() != day
    assert stored.next_fire_at > first_fire


async def wait_for_waiters(
    backend: PostgresBackend, count: int, or_done: asyncio.Task[Any] | None = None
) -> None:
    """Until `count` sessions wait for a lock of this schema (a row's, whose statement
    names the schema, or an advisory lock: the hold's or a calendar's turn), or until
    `or_done` is done (a write that did not wait at all)."""
    statement = (
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND datname = current_database() AND (strpos(query, %s) > 0 OR pid IN ("
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        " AND ((classid::bigint << 32) | objid::bigint) = ANY(%s)))"
    )
    # An advisory lock's 64-bit key is held as two 32-bit halves (classid, objid).
    keys = [hold_lock_key(backend.schema), calendar_lock_key(backend.schema, "holidays")]

    async def enough() -> bool:
        if or_done is not None and or_done.done():
            return True
        rows = await query(backend.url, statement, backend.schema, backend.schema, keys)
        return bool(rows[0][0] >= count)

    await eventually(enough, f"{count} sessions to wait for a lock")
