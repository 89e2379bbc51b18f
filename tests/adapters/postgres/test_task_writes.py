"""Task creates on PostgreSQL: one round trip each (docs/storage.md, "Task writes"),
with or without a calendar, and what that one statement writes; and what only
PostgreSQL's hold meets. The semantics are the contract's
(tests/adapters/test_tasks_contract.py, test_apply_contract.py and their siblings)."""

from __future__ import annotations

from uuid import uuid4

import pytest

from application.ports import HoldScope, TaskUpdate
from domain.calendars import CalendarRef, StoredCalendar
from domain.errors import DuplicateTaskName, InvalidRequest
from domain.triggers import CronTrigger
from tests.adapters.postgres.support import T0, one_connection, query
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task

pytestmark = pytest.mark.postgres

HOURLY = CronTrigger(expression="0 * * * *")
ON_CLOSURES = CronTrigger(expression="0 * * * *", calendar=CalendarRef(name="closures"))


@pytest.mark.parametrize("trigger", [HOURLY, ON_CLOSURES], ids=["plain", "calendar"])
async def test_a_create_costs_one_round_trip(
    postgres_backend: PostgresBackend, trigger: CronTrigger
) -> None:
    async with one_connection(postgres_backend) as one:
        store = one.store
        await store.create_calendar(
            StoredCalendar(id=uuid4(), name="closures", created_at=T0, updated_at=T0)
        )
        for _ in range(6):  # past psycopg's prepare threshold as well
            await store.create_task(make_task(trigger, due=None))
        task = make_task(trigger, due=None, description="the traced one", tags=["a"])
        created, trips = await one.round_trips(lambda: store.create_task(task, actor="ops"))
        [first] = await store.task_history(task.id, None, 10)
    assert trips == 1
    assert created == task
    state = task.spec().model_dump(mode="json")
    assert (first.version, first.actor, first.state) == (1, "ops", state)
    named = await query(
        postgres_backend.url,
        "SELECT calendar FROM {schema}.task_calendars WHERE task_id = %s",
        postgres_backend.schema,
        task.id,
    )
    assert named == ([("closures",)] if trigger.calendar else [])


async def test_a_refused_create_writes_nothing(postgres_backend: PostgresBackend) -> None:
    async with one_connection(postgres_backend) as one:
        store = one.store
        taken = await store.create_task(make_task(HOURLY, name="taken"))
        with pytest.raises(DuplicateTaskName):
            await store.create_task(make_task(HOURLY, name="taken"))
        unnamed = make_task(ON_CLOSURES, due=None)  # no calendar "closures" is stored
        with pytest.raises(InvalidRequest):
            await store.create_task(unnamed)
        assert (await store.get_task(taken.id)).name == "taken"
    rows = await query(
        postgres_backend.url,
        "SELECT (SELECT count(*) FROM {schema}.tasks),"
        " (SELECT count(*) FROM {schema}.task_history),"
        " (SELECT count(*) FROM {schema}.task_calendars)",
        postgres_backend.schema,
    )
    assert rows == [(1, 1, 0)]


async def test_a_hold_refuses_a_name_created_meanwhile_and_claims_pass_over_it(
    postgres_backend: PostgresBackend,
) -> None:
    """Two things only PostgreSQL's hold can meet: another replica creating a name the
    hold lists while it lasts (in memory every write waits for a hold), and a claim,
    which passes over the held tasks (`FOR UPDATE SKIP LOCKED`) instead of waiting."""
    store, other = await postgres_backend.new_store(), await postgres_backend.new_store()
    due = await store.create_task(make_task(HOURLY, name="due", due=T0))
    with pytest.raises(DuplicateTaskName):
        async with store.hold_tasks(HoldScope(frozenset({"due", "racing"}))) as hold:
            assert [task.name for task in hold.tasks] == ["due"]
            assert await other.claim_due(T0, 10, "other:1") == []
            await other.create_task(make_task(HOURLY, name="racing", due=None))
            update = TaskUpdate(due.model_copy(update={"description": "held"}), 1, False)
            await hold.apply_tasks([make_task(HOURLY, name="racing")], [update], [], at=T0)
    assert (await store.get_task(due.id)).description is None  # nothing of the hold
    assert [claimed.task.id for claimed in await other.claim_due(T0, 10, "other:1")] == [due.id]
