"""Fixtures of the HTTP executor's tests: executors closed after each test, and a scripted
server (tests/adapters/http/scripted_server.py) stopped after each test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping

import pytest

from adapters.http import HttpExecutor, HttpExecutorSettings
from adapters.http.guard import Resolver
from tests.adapters.http.scripted_server import ScriptedServer

MakeExecutor = Callable[..., HttpExecutor]


@pytest.fixture
async def make_executor() -> AsyncIterator[MakeExecutor]:
    """Build executors with an empty environment unless one is given."""
    created: list[HttpExecutor] = []

    def make(
        settings: HttpExecutorSettings | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        resolver: Resolver | None = None,
    ) -> HttpExecutor:
        executor = HttpExecutor(settings, environ=environ or {}, resolver=resolver)
        created.append(executor)
        return executor

    yield make
    for executor in created:
        await executor.close()


@pytest.fixture
def executor(make_executor: MakeExecutor) -> HttpExecutor:
    return make_executor()


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    scripted = ScriptedServer()
    await scripted.start()
    yield scripted
    await scripted.stop()
