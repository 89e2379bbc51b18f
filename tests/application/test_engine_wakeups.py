"""The engine contract for wake-ups that arrive while a pass runs: a change reported
then may postdate what the pass read, so the engine looks again at once instead of
sleeping until its next poll (which, under the fake clock, never comes)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from application.engine_runs import CANCEL_ERROR
from domain.runs import RunStatus
from tests.fixtures.cluster import SECOND, T0, Cluster, received
from tests.fixtures.cluster import cluster as cluster  # fixtures
from tests.fixtures.cluster import engine_factory as engine_factory
from tests.fixtures.cluster import http_executor as http_executor
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually


async def test_a_cancel_requested_while_the_owner_passes_stops_its_run(
    cluster: Cluster, recording_target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    recording_target.respond("/hang", Response(delay=60))
    task = await cluster.add(make_task(url=recording_target.url("/hang"), timeout=60))
    engine = await cluster.engine()
    cluster.clock.set(T0)
    await eventually(lambda: received(recording_target, "/hang", 1), "the call")
    [run] = await cluster.wait_runs(task, 1, finished=False)

    # Hold the engine's next pass inside the store, after it has looked for cancel
    # requests (both engines ask for the next due time last), and ask for the cancel then.
    store = cluster.stores[0]
    next_due_at = store.next_due_at
    entered, release = asyncio.Event(), asyncio.Event()

    async def held(*args: Any, **kwargs: Any) -> Any:
        if not release.is_set():
            entered.set()
            await release.wait()
        return await next_due_at(*args, **kwargs)

    monkeypatch.setattr(store, "next_due_at", held)
    cluster.clock.set(T0 + 10 * SECOND)  # past the poll deadline: the engine passes

    async def in_the_pass() -> bool:
        return entered.is_set()

    await eventually(in_the_pass, f"{engine.settings.replica} to begin a pass")
    await cluster.store.request_cancel(run.id)
    release.set()
    [cancelled] = await cluster.wait_runs(task, 1, what="the run to be cancelled")
    assert (cancelled.status, cancelled.error) == (RunStatus.CANCELLED, CANCEL_ERROR)
