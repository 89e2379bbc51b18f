"""Resume and trigger changes never plan an occurrence already claimed (docs/api.md
"When the first occurrence is"): the soak found a task paused and resumed, or given a
new interval, in the very second one of its occurrences was claimed, claiming that
second again (two runs, one Idempotency-Key)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore, NoopExecutor
from application.engine import TriggerLoop
from application.engine_settings import EngineSettings
from application.scheduling import SchedulingService
from domain.tasks import TaskSpec

T0 = datetime(2026, 3, 7, 12, 0, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


@pytest.fixture
async def service(memory_store: InMemoryTaskStore) -> AsyncIterator[SchedulingService]:
    clock = FakeClock(T0)
    engine = TriggerLoop(
        memory_store, memory_store.new_waker(), NoopExecutor(clock), clock,
        EngineSettings(replica="test:1"),
    )  # fmt: skip
    # The engine is never started: the test claims by hand, at the instants it names.
    yield SchedulingService(memory_store, NoopExecutor(clock), clock, engine, replica="test:1")


def every(seconds: int) -> TaskSpec:
    return TaskSpec.model_validate(
        {
            "name": "each-second",
            "trigger": {"kind": "interval", "every": seconds},
            "target": {"url": "http://127.0.0.1:9/run"},
        }
    )


async def claimed_at(store: InMemoryTaskStore, now: datetime) -> list[datetime]:
    return [c.run.scheduled_for for c in await store.claim_due(now, 10, "test:1")]


async def test_a_resume_in_the_second_of_a_claim_does_not_claim_it_again(
    service: SchedulingService, memory_store: InMemoryTaskStore
) -> None:
    task = await service.create_task(every(1))
    assert task.next_run_at == T0  # anchored now: due at once
    assert await claimed_at(memory_store, T0) == [T0]
    await service.pause_task(task.id)
    resumed = await service.resume_task(task.id)
    assert resumed.next_run_at == T0 + SECOND
    assert await claimed_at(memory_store, T0) == []
    assert await claimed_at(memory_store, T0 + SECOND) == [T0 + SECOND]


async def test_a_new_trigger_in_the_second_of_a_claim_starts_after_it(
    service: SchedulingService, memory_store: InMemoryTaskStore
) -> None:
    task = await service.create_task(every(1))
    assert await claimed_at(memory_store, T0) == [T0]
    patched = await service.update_task(task.id, {"trigger": {"kind": "interval", "every": 2}})
    # Anchored at T0 like the old one, whose occurrence at T0 is claimed: the next is T0+2.
    assert patched.next_run_at == T0 + 2 * SECOND
    assert await claimed_at(memory_store, T0 + SECOND) == []
    assert await claimed_at(memory_store, T0 + 2 * SECOND) == [T0 + 2 * SECOND]
