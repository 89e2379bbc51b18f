"""Fixtures of the entrypoint tests."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from adapters.postgres import initialize
from entrypoints.container import build_container
from entrypoints.http.app import create_app
from tests.entrypoints.helpers import make_settings
from tests.fixtures.postgres import drop_schema


@pytest.fixture
def no_scheduler_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI and the settings read SCHEDULER_*: the environment running the tests must
    not leak in (`pytestmark = pytest.mark.usefixtures("no_scheduler_environment")`)."""
    for name in list(os.environ):
        if name.startswith("SCHEDULER_"):
            monkeypatch.delenv(name)


@pytest.fixture
async def client() -> AsyncIterator[AsyncTestClient[Any]]:
    """The API on a fresh in-memory store, engine running, no tokens."""
    app = create_app(build_container(make_settings()))
    async with AsyncTestClient(app=app) as test_client:
        yield test_client


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The settings of the store under test: memory, or a schema of its own in the
    session's database."""
    if request.param == "memory":
        return {}
    url: str = request.getfixturevalue("database_url")
    return {"database_url": url, "db_schema": f"t_{uuid.uuid4().hex[:12]}"}


@pytest.fixture
async def api(store: dict[str, Any]) -> AsyncIterator[AsyncTestClient[Any]]:
    """The API on each store in turn (`store`), engine running, targets on 127.0.0.1
    allowed; the schema dropped afterwards."""
    if store:
        await initialize(store["database_url"], store["db_schema"])
    app = create_app(build_container(make_settings(target_allow="127.0.0.1", **store)))
    try:
        async with AsyncTestClient(app=app) as test_client:
            yield test_client
    finally:
        if store:
            await drop_schema(store["database_url"], store["db_schema"])


@pytest.fixture
async def document(client: AsyncTestClient[Any]) -> dict[str, Any]:
    """The OpenAPI document the API serves (on the in-memory store)."""
    answer = await client.get("/schema/openapi.json")
    assert answer.status_code == 200
    found: dict[str, Any] = answer.json()
    return found
