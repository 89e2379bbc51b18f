"""The claim path's calendars on PostgreSQL: kept by version, read again only when the
version moved, and at no cost to a claim batch naming no calendar."""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, date, datetime
from uuid import uuid4

import pytest

from adapters.postgres import PostgresTaskStore, create_pool
from domain.calendars import CalendarRef, StoredCalendar
from domain.claims import scheduled
from domain.triggers import CronTrigger
from tests.adapters.postgres.support import T0, round_trips
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task

pytestmark = pytest.mark.postgres
HOURLY = CronTrigger(expression="0 * * * *", calendar=CalendarRef(name="closures"))


async def traced_claim(store: PostgresTaskStore, pool: object, now: datetime) -> int:
    """The round trips of one claim pass."""
    with tempfile.TemporaryFile("w+") as trace:
        async with pool.connection() as conn:  # type: ignore[attr-defined]
            conn.pgconn.trace(os.dup(trace.fileno()))
        await store.claim_due(now, 50, "r")
        async with pool.connection() as conn:  # type: ignore[attr-defined]
            conn.pgconn.untrace()
        trace.seek(0)
        return round_trips(trace.read())


async def test_a_claim_reads_only_calendars_whose_version_moved(
    postgres_backend: PostgresBackend,
) -> None:
    pool = create_pool(postgres_backend.url, min_size=1, max_size=1, check=False)
    await pool.open(wait=True)
    try:
        store = PostgresTaskStore(pool, postgres_backend.schema)
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
        assert await traced_claim(store, pool, hours[1]) == 4
        assert store._calendar_cache["closures"] is held  # not read again
        later = datetime(2026, 3, 2, 13, 30, tzinfo=UTC)
        changed = closures.model_copy(update={"dates": (date(2026, 3, 3),), "updated_at": later})
        await PostgresTaskStore(pool, postgres_backend.schema).update_calendar(changed, 1)
        await store.claim_due(hours[2], 50, "r")
        assert store._calendar_cache["closures"].version == 2  # read again, once
    finally:
        await pool.close()
