"""The claim path's calendars on PostgreSQL: kept by version, read again only when the
version moved, and at no cost to a claim batch naming no calendar."""

from __future__ import annotations

from datetime import UTC, date, datetime
from uuid import uuid4

import pytest

from adapters.postgres import PostgresTaskStore
from domain.calendars import CalendarRef, StoredCalendar
from domain.claims import scheduled
from domain.runs import RunStatus
from domain.triggers import CronTrigger
from tests.adapters.postgres.support import T0, OneConnection, one_connection
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task

pytestmark = pytest.mark.postgres
HOURLY = CronTrigger(expression="0 * * * *", calendar=CalendarRef(name="closures"))


async def traced_claim(one: OneConnection, now: datetime) -> int:
    """The round trips of one claim pass."""
    _, trips = await one.round_trips(lambda: one.store.claim_due(now, 50, "r"))
    return trips


async def test_a_claim_reads_only_calendars_whose_version_moved(
    postgres_backend: PostgresBackend,
) -> None:
    async with one_connection(postgres_backend) as one:
        store = one.store
        closures = await store.create_calendar(
            StoredCalendar(id=uuid4(), name="closures", created_at=T0, updated_at=T0)
        )
        for _ in range(5):
            paused = make_task(HOURLY, enabled=False)
            task = scheduled(
                paused.model_copy(update={"enabled": True}), T0, calendars={"closures": closures}
            )
            await store.create_task(task)
        hours = [datetime(2026, 3, 2, 12 + h, tzinfo=UTC) for h in range(4)]
        await store.claim_due(hours[0], 50, "r")
        held = store._calendar_cache["closures"]
        # One more round trip than a batch naming no calendar (3): the version check,
        # which answers no row while the version holds.
        assert await traced_claim(one, hours[1]) == 4
        assert store._calendar_cache["closures"] is held  # not read again
        later = datetime(2026, 3, 2, 13, 30, tzinfo=UTC)
        changed = closures.model_copy(update={"dates": (date(2026, 3, 3),), "updated_at": later})
        await PostgresTaskStore(one.pool, postgres_backend.schema).update_calendar(changed, 1)
        await store.claim_due(hours[2], 50, "r")
        assert store._calendar_cache["closures"].version == 2  # read again, once


async def test_a_claim_never_puts_back_an_older_version_than_the_cache_holds(
    postgres_backend: PostgresBackend,
) -> None:
    """Claims of one replica overlap, and the API writes the cache too: a claim that
    read version 1 in its snapshot, landing after version 2 was cached, decides by what
    it read and leaves version 2 in the cache."""
    async with one_connection(postgres_backend) as one:
        store = one.store
        closures = await store.create_calendar(
            StoredCalendar(id=uuid4(), name="closures", created_at=T0, updated_at=T0)
        )
        paused = make_task(HOURLY, enabled=False)
        task = scheduled(
            paused.model_copy(update={"enabled": True}), T0, calendars={"closures": closures}
        )
        await store.create_task(task)
        # Version 2 would hold 2026-03-02 (a closure): cached meanwhile by another write.
        newer = closures.model_copy(update={"version": 2, "dates": (date(2026, 3, 2),)})
        store._calendar_cache["closures"] = newer
        noon = datetime(2026, 3, 2, 12, tzinfo=UTC)
        [claimed] = await store.claim_due(noon, 50, "r")
        assert (claimed.task.id, claimed.run.scheduled_for) == (task.id, noon)
        assert claimed.run.status is RunStatus.RUNNING  # decided by version 1, as read
        assert store._calendar_cache["closures"] is newer
