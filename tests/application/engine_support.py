"""The native engine's test setup, shared by its modules (test_engine_*, test_zombie): an
in-memory store and a fake clock, stores that fail or count like a database would,
executors that hold or break their calls, an observer that records what it is told."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore, NoopExecutor
from application.engine import TriggerLoop
from application.engine_settings import EngineSettings
from application.ports import CallProgress, Freed
from domain.errors import StoreUnavailable
from domain.runs import ClaimedRun, Run, RunOutcome
from domain.tasks import Task
from tests.fixtures.waiting import eventually

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


class FlakyStore:
    """An in-memory store that fails like a restarting database when told to."""

    def __init__(self, store: InMemoryTaskStore) -> None:
        self.inner = store
        self.down = False
        self.failing_finishes = 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise StoreUnavailable()
            finishing = ("finish_runs", "finish_runs_starting")
            if name in finishing and self.failing_finishes > 0:
                self.failing_finishes -= 1
                raise StoreUnavailable()
            return await method(*args, **kwargs)

        return call


class StuckStore(FlakyStore):
    """A store whose claims wait until `free` is set (a statement waiting on a lock)."""

    def __init__(self, store: InMemoryTaskStore) -> None:
        super().__init__(store)
        self.free = asyncio.Event()

    async def claim_due(self, *args: Any, **kwargs: Any) -> Any:
        await self.free.wait()
        return await self.inner.claim_due(*args, **kwargs)


class GatedExecutor(NoopExecutor):
    """Holds every call until the gate opens; counts how many are in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.running = 0
        self.most = 0

    async def execute(
        self,
        task: Task,
        run: Run,
        last_run_at: datetime | None,
        progress: CallProgress | None = None,
    ) -> RunOutcome:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.gate.wait()
            return await super().execute(task, run, last_run_at, progress)
        finally:
            self.running -= 1


class BrokenExecutor(NoopExecutor):
    async def execute(
        self,
        task: Task,
        run: Run,
        last_run_at: datetime | None,
        progress: CallProgress | None = None,
    ) -> RunOutcome:
        raise RuntimeError("a bug")


class RecordingObserver:
    def __init__(self) -> None:
        self.batches: list[int] = []
        self.started: list[ClaimedRun] = []
        self.lateness: list[float] = []
        self.finished: list[Run] = []
        self.errors: list[BaseException] = []
        self.in_flight_counts: list[int] = []

    def claim_batch(self, count: int, seconds: float) -> None:
        self.batches.append(count)

    def run_started(self, claimed_run: ClaimedRun, lateness_seconds: float) -> None:
        self.started.append(claimed_run)
        self.lateness.append(lateness_seconds)

    def run_finished(self, run: Run, duration_seconds: float) -> None:
        self.finished.append(run)

    def store_error(self, exc: BaseException) -> None:
        self.errors.append(exc)

    def in_flight(self, n: int) -> None:
        self.in_flight_counts.append(n)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def store() -> InMemoryTaskStore:
    return InMemoryTaskStore()


@pytest.fixture
async def engines() -> AsyncIterator[list[TriggerLoop]]:
    started: list[TriggerLoop] = []
    yield started
    for engine in started:
        await engine.stop()


def settings(**overrides: Any) -> EngineSettings:
    base: dict[str, Any] = {
        "replica": "unit",
        "store_retry_initial": 0.01,
        "store_retry_max": 0.05,
        "drain_timeout": 2.0,
    }
    return EngineSettings(**(base | overrides))


async def call_held(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop], task: Task
) -> tuple[GatedExecutor, TriggerLoop, Run]:
    """An engine started on `store` whose call of `task` is under way and held (open
    `executor.gate` to let it answer), with that call's run."""
    executor = GatedExecutor()
    engine = TriggerLoop(store, store.new_waker(), executor, clock, settings())
    engines.append(engine)
    await engine.start()

    async def calling() -> bool:
        return executor.running == 1

    await eventually(calling, "the call")
    [run] = await store.list_runs(task.id, None, None, 10)
    return executor, engine, run


async def finished_runs(store: InMemoryTaskStore, task: Task) -> list[Run]:
    return [r for r in await store.list_runs(task.id, None, None, 100) if r.status.finished]


class CountingStore(FlakyStore):
    """Remembers the size of every batch of outcomes recorded."""

    def __init__(self, store: InMemoryTaskStore) -> None:
        super().__init__(store)
        self.batches: list[int] = []

    async def finish_runs_starting(
        self, outcomes: Sequence[tuple[UUID, RunOutcome]], now: datetime, replica: str
    ) -> Freed:
        if self.down or self.failing_finishes > 0:
            self.failing_finishes -= 1
            raise StoreUnavailable()
        self.batches.append(len(outcomes))
        return await self.inner.finish_runs_starting(outcomes, now, replica)
