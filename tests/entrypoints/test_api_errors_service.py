"""Error table rows 500 and 503 (docs/api.md "Errors"): nothing leaks; readiness names the cause."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from uuid import UUID

import pytest
from dependency_injector import providers
from litestar.testing import AsyncTestClient

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore, NoopExecutor
from application.engine import TriggerLoop
from application.ports import TaskFilter, TaskPageKey
from domain.errors import StoreUnavailable
from domain.tasks import Task
from entrypoints.container import build_container
from entrypoints.http.app import create_app
from entrypoints.http.health import Readiness, StorePing
from tests.application.engine_support import T0, StuckStore, settings
from tests.entrypoints.helpers import Client, assert_problem, cron_task, make_settings
from tests.fixtures.waiting import eventually

SECRET = "s3cret-password"


class BrokenStore(InMemoryTaskStore):
    """A store whose reads fail: `get_task` with an unexpected error that carries SQL and
    a secret, `list_tasks` and `ping` as an outage."""

    async def get_task(self, task_id: UUID) -> Task:
        raise RuntimeError(f"SELECT * FROM scheduler.tasks WHERE password = '{SECRET}'")

    async def get_task_by_name(self, name: str) -> Task:
        raise RuntimeError(f"SELECT * FROM scheduler.tasks WHERE password = '{SECRET}'")

    async def list_tasks(
        self, task_filter: TaskFilter, after: TaskPageKey | None, limit: int
    ) -> list[Task]:
        raise StoreUnavailable()

    async def ping(self) -> None:
        raise StoreUnavailable()

    async def create_task(self, task: Task, *, actor: str | None = None) -> Task:
        raise StoreUnavailable()


@pytest.fixture
async def broken() -> AsyncIterator[Client]:
    container = build_container(make_settings())
    container.memory_store.override(providers.Singleton(BrokenStore))
    async with AsyncTestClient(app=create_app(container, run_engine=False)) as client:
        yield client


async def test_an_internal_error_is_a_500_that_leaks_nothing_but_is_logged(
    broken: Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        response = await broken.get("/tasks/nightly-report")

    problem = assert_problem(response, 500)
    assert SECRET not in response.text and "SELECT" not in response.text
    assert "Traceback" not in response.text and "RuntimeError" not in response.text
    assert set(problem) == {"type", "title", "status", "detail"}
    assert any(SECRET in (record.exc_text or "") for record in caplog.records)


async def test_a_store_outage_is_a_503_with_retry_after(broken: Client) -> None:
    response = await broken.get("/tasks")
    written = await broken.post("/tasks", json=cron_task("http://127.0.0.1:9/"))

    assert assert_problem(response, 503)["detail"] == "the task store is unavailable; retry shortly"
    assert response.headers["retry-after"] == "5"
    # A change may have reached the database before the connection went.
    assert "may have been made: read it back" in assert_problem(written, 503)["detail"]


async def test_readiness_fails_while_the_store_is_unreachable(broken: Client) -> None:
    problem = assert_problem(await broken.get("/readyz"), 503)

    assert problem["checks"]["store"].startswith("unavailable")
    assert (await broken.get("/healthz")).status_code == 200
    # A load balancer probing with HEAD sees the same, without a body.
    probed = await broken.head("/readyz")
    assert probed.status_code == 503 and probed.content == b""
    assert (await broken.head("/healthz")).status_code == 200


async def test_readiness_fails_when_the_engine_is_not_running() -> None:
    container = build_container(make_settings())
    app = create_app(container)
    async with AsyncTestClient(app=app) as client:
        await eventually(lambda: _status(client, "/readyz", 200))
        # The app and its engine run on the test client's own event loop.
        client.blocking_portal.call(container.engine().stop)

        problem = assert_problem(await client.get("/readyz"), 503)

    assert problem["checks"]["store"] == "ok"
    assert problem["checks"]["engine"].startswith("not running")


async def _status(client: Client, path: str, status: int) -> bool:
    return (await client.get(path)).status_code == status


class SilentStore(InMemoryTaskStore):
    """A store whose ping gets no answer until `answer` is set (a database gone silent
    with its connections open), counting the pings."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.answer = asyncio.Event()
        self.pings = 0

    async def ping(self) -> None:
        self.pings += 1
        try:
            await self.answer.wait()
        except asyncio.CancelledError:
            await asyncio.sleep(30)  # the cancel request goes unanswered too, for a while
            raise


async def test_readiness_answers_within_its_timeout_while_the_store_is_silent() -> None:
    container = build_container(make_settings())
    container.memory_store.override(providers.Singleton(SilentStore))
    store = container.task_store()
    assert isinstance(store, SilentStore)
    async with AsyncTestClient(app=create_app(container, run_engine=False)) as client:
        for _ in range(2):
            began = time.monotonic()
            problem = assert_problem(await client.get("/readyz"), 503)
            assert time.monotonic() - began < 10  # the 2 s of the check, not the silence
            assert problem["checks"]["store"] == "unavailable (no answer within 2 s)"
        assert store.pings == 1  # the second probe waited on the first ping

        client.blocking_portal.call(store.answer.set)

        await eventually(lambda: _status(client, "/readyz", 200))


async def test_readiness_names_an_engine_whose_pass_is_stalled() -> None:
    clock = FakeClock(T0)
    store = InMemoryTaskStore()
    stuck = StuckStore(store)  # its claims wait, as a statement on a lock does
    engine = TriggerLoop(
        stuck, store.new_waker(), NoopExecutor(clock), clock, settings(pass_stall=0.05)
    )
    readiness = Readiness(StorePing(store), engine)
    await engine.start()
    try:

        async def stalled() -> bool:
            return engine.stalled_for is not None

        await eventually(stalled, "the engine's pass to stall")
        checks = await readiness.checks()
        stuck.free.set()

        async def went_on() -> bool:
            return engine.alive and engine.stalled_for is None

        await eventually(went_on, "the pass to go on")
        after = await readiness.checks()
    finally:
        stuck.free.set()
        await engine.stop()

    assert checks["store"] == "ok"
    assert checks["engine"].startswith("stalled (its pass over the store has waited ")
    assert after == {"store": "ok", "engine": "ok"}
