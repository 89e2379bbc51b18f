"""A calendar change takes its turn among the task writes naming the calendar
(docs/storage.md, "Lock order"): it waits for those under way and goes before those
that come after it. Every task write naming a calendar takes a key-share lock on its
row, which the change's `FOR UPDATE` must wait for while a later key share does not:
writes one after another, each overlapping the last (applies holding their tasks, an
audit saw), kept a change waiting past the API's answer limit (a 503)."""

from __future__ import annotations

import asyncio
from datetime import date
from uuid import uuid4

import pytest

from adapters.postgres.advisory import calendar_lock_key, hold_lock_key
from application.ports import HoldScope
from domain.calendars import CalendarRef, StoredCalendar
from domain.errors import InvalidRequest
from domain.triggers import CronTrigger
from tests.adapters.postgres.support import T0, query
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually

pytestmark = pytest.mark.postgres


def daily(calendar: str) -> CronTrigger:
    return CronTrigger(expression="0 9 * * *", calendar=CalendarRef(name=calendar))


@pytest.mark.parametrize("next_write", ["hold", "create"])
@pytest.mark.parametrize("change", ["update", "delete"])
async def test_a_calendar_change_goes_before_task_writes_that_came_after_it(
    postgres_backend: PostgresBackend, change: str, next_write: str
) -> None:
    """A hold naming the calendar is under way; a change of the calendar waits for it;
    then another write naming it (a hold, or a create that holds nothing) comes: the
    change goes first. Before, the create went through at once (its key share did not
    wait for the change waiting before it), and the next hold went first about one time
    in ten."""
    first, calendars, second = [await postgres_backend.new_store() for _ in range(3)]
    calendar = await first.create_calendar(
        StoredCalendar(id=uuid4(), name="holidays", created_at=T0, updated_at=T0)
    )
    naming = HoldScope(frozenset({"nightly"}), calendars=frozenset({"holidays"}))
    order: list[str] = []

    async def change_calendar() -> None:
        if change == "update":
            changed = calendar.model_copy(update={"dates": (date(2026, 12, 25),)})
            await calendars.update_calendar(changed, calendar.version)
        else:
            await calendars.delete_calendar(calendar.name)
        order.append("calendar changed")

    async def write_next() -> None:
        try:
            if next_write == "create":
                await second.create_task(make_task(daily("holidays"), due=None))
            else:
                async with second.hold_tasks(naming):
                    order.append("next write")
                    # Kept until the change is in, or a while: a change waiting for
                    # this hold's key share would not end before it.
                    await asyncio.wait_for(asyncio.shield(changing), 2)
        finally:
            if next_write == "create":
                order.append("next write")

    async with first.hold_tasks(naming):
        changing = asyncio.create_task(change_calendar())
        await wait_for_waiters(postgres_backend, 1)
        writing = asyncio.create_task(write_next())
        await wait_for_waiters(postgres_backend, 2, or_done=writing)

    changed, written = await asyncio.gather(changing, writing, return_exceptions=True)
    assert order == ["calendar changed", "next write"]
    assert changed is None
    if next_write == "create" and change == "delete":
        assert isinstance(written, InvalidRequest)
        assert written.field == "trigger.calendar.name"
    else:
        assert written is None


async def wait_for_waiters(
    backend: PostgresBackend, count: int, or_done: asyncio.Task[None] | None = None
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
