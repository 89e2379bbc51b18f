"""The sync use cases over a store of a test's choosing (often one wrapping a backend's
store to make another client's writes land at chosen moments)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from adapters.clock import FakeClock
from adapters.memory import NoopExecutor
from application.engine import TriggerLoop
from application.engine_settings import EngineSettings
from application.scheduling import SchedulingService
from application.sync import TaskSync
from tests.fixtures.backends import Backend

T0 = datetime(2026, 3, 7, 12, 0, 0, tzinfo=UTC)


async def sync_over(store: Any, backend: Backend) -> tuple[TaskSync, SchedulingService]:
    """TaskSync and the SchedulingService it shares, on `store` at T0 (a fake clock).
    Their engine is never started: only the task writes matter."""
    clock = FakeClock(T0)
    engine = TriggerLoop(
        store, await backend.new_waker(), NoopExecutor(clock), clock,
        EngineSettings(replica="test:1"),
    )  # fmt: skip
    service = SchedulingService(store, NoopExecutor(clock), clock, engine, replica="test:1")
    return TaskSync(store, NoopExecutor(clock), clock, service), service
