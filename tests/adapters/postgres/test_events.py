"""The PostgreSQL outbox is written in the transaction of the change that raises it:
when writing the event fails, the change itself is rolled back (and the other way
round), which the store contract cannot show on the in-memory store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
import pytest

from adapters.postgres import PostgresTaskStore
from domain.runs import RunOutcome, RunStatus
from domain.tasks import Notify
from tests.adapters.postgres.support import MINUTE, SECOND, T0, query
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import make_task

pytestmark = pytest.mark.postgres

NOTIFY = Notify(url="http://127.0.0.1:9/events")


@pytest.fixture
async def refusing(postgres_backend: PostgresBackend) -> AsyncIterator[str]:
    """A trigger that fails every insert into the outbox until the test drops it."""
    url, schema = postgres_backend.url, postgres_backend.schema
    await query(
        url,
        "CREATE FUNCTION {schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'outbox refused'; END $$",
        schema,
    )
    await query(
        url,
        "CREATE TRIGGER refuse BEFORE INSERT ON {schema}.events "
        "FOR EACH STATEMENT EXECUTE FUNCTION {schema}.refuse()",
        schema,
    )
    yield "DROP TRIGGER refuse ON {schema}.events"


async def count(backend: PostgresBackend, table: str) -> int:
    [(n,)] = await query(backend.url, f"SELECT count(*) FROM {{schema}}.{table}", backend.schema)
    return int(n)


async def test_a_claim_whose_event_fails_is_rolled_back(
    postgres_store: PostgresTaskStore, postgres_backend: PostgresBackend, refusing: str
) -> None:
    task = await postgres_store.create_task(make_task(misfire_grace_seconds=5, notify=NOTIFY))
    with pytest.raises(psycopg.errors.RaiseException):
        await postgres_store.claim_due(T0 + 30 * SECOND, 10, "r1")
    assert await count(postgres_backend, "runs") == 0
    assert (await postgres_store.get_task(task.id)).next_run_at == T0

    await query(postgres_backend.url, refusing, postgres_backend.schema)
    [claimed] = await postgres_store.claim_due(T0 + 30 * SECOND, 10, "r1")
    assert claimed.run.status is RunStatus.MISSED
    assert await count(postgres_backend, "events") == 1


async def test_an_outcome_whose_event_fails_is_rolled_back(
    postgres_store: PostgresTaskStore, postgres_backend: PostgresBackend, refusing: str
) -> None:
    task = await postgres_store.create_task(make_task(notify=NOTIFY, pause_after_failures=1))
    [claimed] = await postgres_store.claim_due(T0, 10, "r1")  # a running run raises nothing
    failure = RunOutcome(status=RunStatus.FAILED, attempts=1, error="HTTP 500", finished_at=T0)
    with pytest.raises(psycopg.errors.RaiseException):
        await finish_one(postgres_store, claimed.run.id, failure)
    assert (await postgres_store.get_run(claimed.run.id)).status is RunStatus.RUNNING
    assert (await postgres_store.get_task(task.id)).enabled is True

    await query(postgres_backend.url, refusing, postgres_backend.schema)
    assert (await finish_one(postgres_store, claimed.run.id, failure)).status is RunStatus.FAILED
    assert (await postgres_store.get_task(task.id)).enabled is False
    assert await count(postgres_backend, "events") == 2  # run.failed, task.auto_paused


async def test_a_lost_run_whose_event_fails_stays_running(
    postgres_store: PostgresTaskStore, postgres_backend: PostgresBackend, refusing: str
) -> None:
    await postgres_store.create_task(make_task(notify=NOTIFY))
    [claimed] = await postgres_store.claim_due(T0, 10, "r1")
    with pytest.raises(psycopg.errors.RaiseException):
        await postgres_store.expire_lost_runs(T0 + 60 * MINUTE)
    assert (await postgres_store.get_run(claimed.run.id)).status is RunStatus.RUNNING
    await query(postgres_backend.url, refusing, postgres_backend.schema)
    [lost] = await postgres_store.expire_lost_runs(T0 + 60 * MINUTE)
    assert lost.id == claimed.run.id
    assert await count(postgres_backend, "events") == 1
