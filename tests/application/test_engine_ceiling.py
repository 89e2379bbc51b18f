"""The native engine's ceiling on runs in flight: claims take no more than the free slots."""

from __future__ import annotations

from datetime import datetime

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore, NoopExecutor
from application.engine import TriggerLoop
from domain.runs import ClaimedRun
from domain.triggers import IntervalTrigger
from tests.application.engine_support import (
    T0,
    FlakyStore,
    GatedExecutor,
    RecordingObserver,
    finished_runs,
    settings,
)
from tests.application.engine_support import clock as clock  # fixtures
from tests.application.engine_support import engines as engines
from tests.application.engine_support import store as store
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually


async def test_a_saturated_engine_claims_half_its_ceiling_at_a_time(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    observer = RecordingObserver()
    tasks = [await store.create_task(make_task()) for _ in range(40)]
    engine = TriggerLoop(
        store,
        store.new_waker(),
        NoopExecutor(clock),
        clock,
        settings(max_concurrent_runs=10, batch_size=100),
        observer,
    )
    engines.append(engine)
    await engine.start()

    async def all_done() -> bool:
        return all([await finished_runs(store, t) for t in tasks])

    await eventually(all_done, "every task to run")
    assert max(observer.batches) == 5  # while the other half is being recorded
    assert sum(observer.batches) == 40


async def test_an_engine_is_behind_while_more_runs_are_due_than_it_has_started(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    tasks = [await store.create_task(make_task()) for _ in range(6)]
    executor = GatedExecutor()
    engine = TriggerLoop(store, store.new_waker(), executor, clock, settings(max_concurrent_runs=4))
    engines.append(engine)
    assert not engine.behind
    await engine.start()

    async def ceiling_reached() -> bool:
        return executor.running == 4

    await eventually(ceiling_reached, "four runs in flight")
    assert engine.behind  # two more are due, and no slot is free

    executor.gate.set()

    async def caught_up() -> bool:
        done = all([await finished_runs(store, t) for t in tasks])
        return done and not engine.behind

    await eventually(caught_up, "every task run, and nothing left due")


class SlowClaims(FlakyStore):
    """Time passes during the first claim, as it does when a claim is slow."""

    def __init__(self, store: InMemoryTaskStore, clock: FakeClock) -> None:
        super().__init__(store)
        self.clock = clock
        self.claims = 0

    async def claim_due(self, now: datetime, limit: int, replica: str) -> list[ClaimedRun]:
        claimed = await self.inner.claim_due(now, limit, replica)
        self.claims += 1
        if self.claims == 1:
            self.clock.advance(1)
        return claimed


async def test_a_task_that_came_due_during_a_pass_is_claimed_at_once(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    task = await store.create_task(make_task(IntervalTrigger(every=1)))
    engine = TriggerLoop(
        SlowClaims(store, clock), store.new_waker(), NoopExecutor(clock), clock, settings()
    )
    engines.append(engine)
    await engine.start()

    async def both() -> bool:
        return len(await finished_runs(store, task)) == 2

    await eventually(both, "the occurrence that came due while claiming")


async def test_claims_never_exceed_the_free_slots(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    executor = GatedExecutor()
    tasks = [await store.create_task(make_task()) for _ in range(10)]
    engine = TriggerLoop(
        store, store.new_waker(), executor, clock, settings(max_concurrent_runs=3, batch_size=2)
    )
    engines.append(engine)
    await engine.start()

    async def three_running() -> bool:
        return executor.running == 3

    await eventually(three_running, "three calls")
    claimed = [t for t in tasks if (await store.get_task(t.id)).next_run_at != T0]
    assert len(claimed) == 3  # the other seven wait in the store, not in the process
    executor.gate.set()  # finishing runs wake the loop: no clock move, no notification

    async def all_done() -> bool:
        return all([await finished_runs(store, t) for t in tasks])

    await eventually(all_done, "every task to run")
    assert executor.most == 3
