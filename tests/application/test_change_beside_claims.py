"""A change of a task's schedule planned before a claim and written after it (a replica
stalled between the two: a pause, a long garbage collection, a wait for a connection)
must not claim that occurrence again: the write finds the schedule moved, and the use
case reads the task again and plans anew. The stores' side of it is in the contract
suites (tests/adapters/test_tasks_contract.py, test_apply_contract.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore, NoopExecutor
from application.engine import TriggerLoop
from application.engine_settings import EngineSettings
from application.scheduling import SchedulingService
from application.sync import TaskSync
from domain.runs import occurrence_key
from domain.tasks import Task, TaskSpec
from tests.fixtures.tasks import task_spec

T0 = datetime(2026, 3, 7, 12, 0, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


class ClaimedMeanwhile(InMemoryTaskStore):
    """Before the first rescheduling write lands, the clock moves to `at` and what is
    due then is claimed, as another replica would while this one stalled."""

    def __init__(self, clock: FakeClock, at: datetime) -> None:
        super().__init__()
        self._clock, self._at = clock, at
        self.claimed: list[Any] = []
        self.stalled = False

    async def update_task(self, task: Task, expected_version: int, **kwargs: Any) -> Task:
        if kwargs.get("reschedule") and not self.stalled:
            self.stalled = True
            self._clock.set(self._at)
            self.claimed += await self.claim_due(self._at, 10, "other")
        return await super().update_task(task, expected_version, **kwargs)


@pytest.mark.parametrize("how", ["patch", "put"])
async def test_a_change_planned_before_a_claim_never_claims_that_occurrence_again(
    how: str,
) -> None:
    clock = FakeClock(T0 + 10 * timedelta(seconds=1))
    store = ClaimedMeanwhile(clock, T0 + 2 * MINUTE)
    engine = TriggerLoop(
        store, store.new_waker(), NoopExecutor(clock), clock, EngineSettings(replica="test")
    )
    service = SchedulingService(store, NoopExecutor(clock), clock, engine, replica="test")
    minutely = {"kind": "cron", "expression": "* * * * *", "timezone": "UTC"}
    task = await service.create_task(task_spec(trigger=minutely, catch_up="all"))
    assert task.next_fire_at == T0 + MINUTE
    # Every 30 s from T0: planned at T0 + 10 s, its next would be T0 + 30 s, and a claim
    # after the write would take T0 + 30 s, T0 + 60 s, T0 + 90 s and T0 + 120 s again.
    every_30 = {"kind": "interval", "every": 30, "start_at": T0.isoformat()}
    if how == "patch":
        changed = await service.update_task(task.id, {"trigger": every_30})
    else:
        sync = TaskSync(store, NoopExecutor(clock), clock, service)
        spec = TaskSpec.model_validate(task_spec(trigger=every_30, catch_up="all"))
        changed, _ = await sync.put_task(spec)
    assert store.stalled
    # The old schedule's occurrences, claimed (catch-up all: each its own run).
    assert [c.run.scheduled_for for c in store.claimed] == [T0 + MINUTE, T0 + 2 * MINUTE]
    # Planned again from the task as the claim left it, at T0 + 2 min: that second was
    # the replaced schedule's, so the new one starts after it.
    assert changed.next_fire_at == T0 + 2 * MINUTE + timedelta(seconds=30)
    later = await store.claim_due(T0 + 10 * MINUTE, 100, "test")
    keys = [occurrence_key(task.id, c.run.scheduled_for) for c in [*store.claimed, *later]]
    assert len(keys) == len(set(keys))  # no occurrence called twice


async def test_two_changes_in_the_second_of_a_claim_never_claim_that_second_again() -> None:
    # Claimed at S under an every-second schedule; changed to one with no occurrence at S
    # (so the same-second rule of the replaced schedule does not apply), then back to
    # every second, in that same second: the new schedule starts after S all the same.
    clock = FakeClock(T0)
    store = InMemoryTaskStore()
    engine = TriggerLoop(
        store, store.new_waker(), NoopExecutor(clock), clock, EngineSettings(replica="test")
    )
    service = SchedulingService(store, NoopExecutor(clock), clock, engine, replica="test")
    every_second = {"kind": "cron", "expression": "* * * * * *", "timezone": "UTC"}
    task = await service.create_task(task_spec(trigger=every_second))
    second = T0 + 4 * timedelta(seconds=1)  # not a multiple of 3
    clock.set(second)
    [claimed] = await store.claim_due(second, 10, "other")
    assert claimed.run.scheduled_for == second
    every_third = {"kind": "cron", "expression": "*/3 * * * * *", "timezone": "UTC"}
    await service.update_task(task.id, {"trigger": every_third})
    changed = await service.update_task(task.id, {"trigger": every_second})
    assert changed.next_fire_at == second + timedelta(seconds=1)
    assert await store.claim_due(second, 10, "test") == []
