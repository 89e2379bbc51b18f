"""Database outages as an API client sees them (docs/operations.md, "Database outages"):
a connection that died while idle fails no request; a write that meets an outage
answers 503 and writes nothing. Only the backends of the test's own database are
terminated: the server is shared."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from litestar.testing import AsyncTestClient
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from entrypoints.container import build_container
from entrypoints.http.app import create_app
from tests.adapters.postgres.support import kill_idle_connections
from tests.entrypoints.helpers import cron_task, make_settings
from tests.fixtures.database import server_url
from tests.fixtures.target import RecordingTarget
from tests.fixtures.waiting import eventually

pytestmark = pytest.mark.postgres

Client = AsyncTestClient[Any]


@pytest.fixture
async def pg_client(database_url: str, postgres_schema: str) -> AsyncIterator[Client]:
    settings = make_settings(database_url=database_url, db_schema=postgres_schema, pool_size=3)
    app = create_app(build_container(settings))
    async with AsyncTestClient(app=app) as client:
        yield client


async def test_requests_right_after_every_backend_was_terminated_succeed(
    pg_client: Client, database_url: str, postgres_schema: str, recording_target: RecordingTarget
) -> None:
    assert (
        await pg_client.post("/tasks", json=cron_task(recording_target.url()))
    ).status_code == 201
    for _ in range(3):  # every pooled connection has been used and is idle again
        assert (await pg_client.get("/tasks")).status_code == 200
    assert await kill_idle_connections(database_url, postgres_schema) >= 1

    listed = await pg_client.get("/tasks")
    created = await pg_client.post("/tasks", json=cron_task(recording_target.url(), name="second"))

    assert listed.status_code == 200, listed.text
    assert created.status_code == 201, created.text
    names = [task["name"] for task in (await pg_client.get("/tasks")).json()["items"]]
    assert sorted(names) == ["nightly-report", "second"]


async def test_a_write_during_an_outage_answers_503_and_writes_nothing(
    pg_client: Client, database_url: str, postgres_schema: str, recording_target: RecordingTarget
) -> None:
    assert (await pg_client.get("/tasks")).status_code == 200
    async with OwnDatabaseClosed(database_url):
        refused = await pg_client.post("/tasks", json=cron_task(recording_target.url()))

        assert refused.status_code == 503, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")

    async def listed() -> bool:
        return (await pg_client.get("/tasks")).status_code == 200

    await eventually(listed, within=30)
    assert (await pg_client.get("/tasks")).json()["items"] == []
    created = await pg_client.post("/tasks", json=cron_task(recording_target.url()))
    assert created.status_code == 201, created.text


class OwnDatabaseClosed:
    """The test's own database refuses new connections (ALLOW_CONNECTIONS false) and its
    backends are terminated; it accepts connections again when the block ends: an
    outage of this database only."""

    def __init__(self, database_url: str) -> None:
        self._name = conninfo_to_dict(database_url)["dbname"]

    async def _allow(self, allowed: bool) -> None:
        async with await psycopg.AsyncConnection.connect(server_url(), autocommit=True) as admin:
            statement = sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS {}").format(
                sql.Identifier(str(self._name)), sql.SQL("true" if allowed else "false")
            )
            await admin.execute(statement)

    async def __aenter__(self) -> None:
        await self._allow(False)
        async with await psycopg.AsyncConnection.connect(server_url(), autocommit=True) as admin:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                [self._name],
            )

    async def __aexit__(self, *exc: object) -> None:
        await self._allow(True)
