"""The native engine writes outcomes in batches: record_batch_size, at once if idle or stopping."""

from __future__ import annotations

import asyncio
import functools

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore, NoopExecutor
from application.engine import TriggerLoop
from domain.runs import RunStatus
from tests.application.engine_support import CountingStore, GatedExecutor, finished_runs, settings
from tests.application.engine_support import clock as clock  # fixtures
from tests.application.engine_support import engines as engines
from tests.application.engine_support import store as store
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import WAIT, eventually


async def test_outcomes_are_recorded_in_batches(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    counting = CountingStore(store)
    executor = GatedExecutor()
    tasks = [await store.create_task(make_task()) for _ in range(25)]
    engine = TriggerLoop(
        counting, store.new_waker(), executor, clock, settings(record_batch_size=10)
    )
    engines.append(engine)
    await engine.start()

    async def all_called() -> bool:
        return executor.running == 25

    await eventually(all_called, "25 calls")
    executor.gate.set()  # 25 outcomes at once: 10, 10, then 5 after record_delay

    async def all_recorded() -> bool:
        # A run leaves the engine a step after its batch is written.
        return sum(counting.batches) == 25 and engine.in_flight == 0

    await eventually(all_recorded, "every outcome recorded, no run left in flight")
    assert sorted(counting.batches, reverse=True)[:2] == [10, 10]
    assert max(counting.batches) == 10
    for task in tasks:
        [run] = await finished_runs(store, task)
        assert run.status is RunStatus.SUCCEEDED


async def test_outcomes_go_at_once_when_no_call_is_left(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    counting = CountingStore(store)
    tasks = [await store.create_task(make_task()) for _ in range(3)]
    # Outcomes would wait a minute for company, but once every call has ended nothing
    # else can come before slots are freed.
    engine = TriggerLoop(
        counting,
        store.new_waker(),
        NoopExecutor(clock),
        clock,
        settings(record_delay=60.0, record_batch_size=1000),
    )
    engines.append(engine)
    await engine.start()
    for task in tasks:
        await eventually(functools.partial(finished_runs, store, task), "the run", within=5)
    assert sum(counting.batches) == 3


async def test_stop_records_every_outcome_at_once(
    store: InMemoryTaskStore, clock: FakeClock
) -> None:
    executor = GatedExecutor()
    tasks = [await store.create_task(make_task()) for _ in range(5)]
    # Outcomes would wait ten minutes for company; stopping sends them at once.
    engine = TriggerLoop(
        store,
        store.new_waker(),
        executor,
        clock,
        settings(record_delay=600.0, record_batch_size=1000),
    )
    await engine.start()

    async def all_called() -> bool:
        return executor.running == 5

    await eventually(all_called, "five calls")
    executor.gate.set()
    # Within WAIT (30 s), a twentieth of the outcomes' delay: stop did not wait it out.
    async with asyncio.timeout(WAIT):
        await engine.stop()
    for task in tasks:
        [run] = await finished_runs(store, task)
        assert run.status is RunStatus.SUCCEEDED
