"""The zombie rule at the moment a request would be sent (docs/reliability.md): a replica
whose whole process was held up past a run's budget (stopped, a paused VM, a collector
pause) wakes with every timer expired at once. A retry whose wait ended during the stall
is then woken in the same turn as the limit that stops the call; it must not send its
request, which could reach the target after the lease, when another replica may already
run the occurrence. Driven through the real engine, HTTP executor and a local target."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from adapters.clock import FakeClock
from adapters.http import HttpExecutor
from adapters.memory import InMemoryTaskStore
from application.engine import TriggerLoop
from application.engine_runs import LEASE_ERROR
from domain.claims import LEASE_MARGIN, lease_duration
from domain.runs import RunStatus
from domain.tasks import RetryPolicy
from domain.triggers import IntervalTrigger
from tests.application.engine_support import clock as clock  # fixtures
from tests.application.engine_support import engines as engines
from tests.application.engine_support import finished_runs, settings
from tests.application.engine_support import store as store
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually

BUDGET = 2.0  # seconds the call has left when it starts (less, as leases are stored)
RETRY_WAIT = 0.3  # ends during the stall, before the budget's timer: woken first
STALL = 3.0  # the whole process held up, past both


@pytest.fixture
async def executor() -> AsyncIterator[HttpExecutor]:
    executor = HttpExecutor(environ={})
    yield executor
    await executor.close()


# The retry's connection: the first's, kept alive, or a new one (the target closed it).
@pytest.mark.parametrize("headers", [{}, {"Connection": "close"}], ids=["kept", "new"])
async def test_a_retry_due_during_a_stall_past_the_budget_is_not_sent(
    store: InMemoryTaskStore,
    clock: FakeClock,
    engines: list[TriggerLoop],
    executor: HttpExecutor,
    recording_target: RecordingTarget,
    caplog: pytest.LogCaptureFixture,
    headers: dict[str, str],
) -> None:
    caplog.set_level(logging.INFO, "scheduler")
    recording_target.respond("/", Response(503, b"busy", headers), Response(200, b"done"))
    retry = RetryPolicy(max_attempts=2, backoff_seconds=RETRY_WAIT)
    task = await store.create_task(
        make_task(IntervalTrigger(every=3600), enabled=False, url=recording_target.url("/"),
                  retry=retry)
    )  # fmt: skip
    engine = TriggerLoop(store, store.new_waker(), executor, clock, settings())
    engines.append(engine)
    await engine.start()
    # Claimed long enough ago that BUDGET seconds are left before half the lease margin.
    ago = lease_duration(task.target) - LEASE_MARGIN / 2 - timedelta(seconds=BUDGET)
    claimed = await store.start_manual_run(task.id, clock.now() - ago, "unit")
    engine.dispatch(claimed)

    async def waiting_to_retry() -> bool:
        return any("retrying in" in r.getMessage() for r in caplog.records)

    await eventually(waiting_to_retry, "the first answer and the retry's wait")
    # The whole event loop is held up, as a stopped process is: the retry's wait and
    # the budget both expire meanwhile, the retry's first.
    asyncio.get_running_loop().call_soon(time.sleep, STALL)
    [run] = await eventually(lambda: finished_runs(store, task), "the stopped call")

    assert len(recording_target.received()) == 1  # the retry was never sent
    # Nor counted: refused before its request was written (or its connection opened).
    assert (run.status, run.error, run.attempts, run.http_status) == (
        RunStatus.FAILED, LEASE_ERROR, 1, 503
    )  # fmt: skip
