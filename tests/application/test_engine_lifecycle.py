"""The native engine's loop: start and stop idempotent, a raising executor, settings refused."""

from __future__ import annotations

from datetime import timedelta

import pytest

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore, NoopExecutor
from application.engine import TriggerLoop
from application.engine_settings import EngineSettings
from domain.runs import RunStatus
from tests.application.engine_support import BrokenExecutor, finished_runs, settings
from tests.application.engine_support import clock as clock  # fixtures
from tests.application.engine_support import engines as engines
from tests.application.engine_support import store as store
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually


async def test_start_and_stop_are_idempotent(store: InMemoryTaskStore, clock: FakeClock) -> None:
    engine = TriggerLoop(store, store.new_waker(), NoopExecutor(clock), clock, settings())
    assert not engine.alive
    await engine.start()
    await engine.start()

    async def alive() -> bool:
        return engine.alive

    await eventually(alive, "the engine")
    await engine.stop()
    await engine.stop()
    assert not engine.alive


def test_settings_reject_nonsense() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        EngineSettings(batch_size=0)
    with pytest.raises(ValueError, match="max_poll_interval"):
        EngineSettings(max_poll_interval=timedelta(0))
    with pytest.raises(ValueError, match="backoff"):
        EngineSettings(store_retry_initial=2, store_retry_max=1)
    assert ":" in EngineSettings().replica


async def test_an_executor_that_raises_fails_the_run_not_the_loop(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    task = await store.create_task(make_task())
    engine = TriggerLoop(store, store.new_waker(), BrokenExecutor(), clock, settings())
    engines.append(engine)
    await engine.start()
    [run] = await eventually(lambda: finished_runs(store, task), "the failed run")
    assert (run.status, run.error) == (RunStatus.FAILED, "executor error (RuntimeError)")
    assert engine.alive
