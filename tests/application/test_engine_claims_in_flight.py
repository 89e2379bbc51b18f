"""A claim pass with a backlog keeps two claims under way (application/claim_pass.py):
each due occurrence still runs once, under the ceiling, and a claim that fails or hangs
beside another loses none of the other's runs."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore, NoopExecutor
from application.engine import TriggerLoop
from domain.errors import StoreUnavailable
from domain.runs import ClaimedRun, RunStatus
from domain.tasks import Task
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


class OverlapStore(FlakyStore):
    """Counts the claims under way at once; the n-th claim can fail or hang."""

    def __init__(self, store: InMemoryTaskStore) -> None:
        super().__init__(store)
        self.calls = 0
        self.under_way = 0
        self.most = 0
        self.first_alone = False
        self.fail_call: int | None = None
        self.failed_beside_another = False
        self.hang_from: int | None = None  # this claim and every later one hang
        self.hanging = 0
        self.limits_beside: list[int] = []  # the limits of claims made beside another

    async def claim_due(self, now: datetime, limit: int, replica: str) -> list[ClaimedRun]:
        self.calls += 1
        call = self.calls
        self.under_way += 1
        self.most = max(self.most, self.under_way)
        if self.under_way > 1:
            self.limits_beside.append(limit)
        if call == 1:
            self.first_alone = self.under_way == 1
        try:
            for _ in range(3 * call):  # a round trip, each claim's longer than the last:
                await asyncio.sleep(0)  # the pass may start another meanwhile
            if call == self.fail_call:
                self.failed_beside_another = self.under_way > 1
                raise StoreUnavailable()
            if self.hang_from is not None and call >= self.hang_from:
                self.hanging += 1
                await asyncio.Event().wait()  # a statement that never answers
            return await self.inner.claim_due(now, limit, replica)
        finally:
            self.under_way -= 1


def engine_on(
    store: Any, clock: FakeClock, executor: NoopExecutor, **overrides: Any
) -> TriggerLoop:
    return TriggerLoop(
        store, store.inner.new_waker(), executor, clock, settings(**overrides), RecordingObserver()
    )


async def every_task_run(store: InMemoryTaskStore, tasks: list[Task]) -> None:
    async def all_done() -> bool:
        return all([await finished_runs(store, t) for t in tasks])

    await eventually(all_done, "every task to run")


async def runs_of(store: InMemoryTaskStore, tasks: list[Task]) -> list[int]:
    return [len(await store.list_runs(task.id, None, None, 10)) for task in tasks]


async def test_a_backlog_is_claimed_two_claims_at_a_time_each_occurrence_once(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    tasks = [await store.create_task(make_task()) for _ in range(30)]
    overlap = OverlapStore(store)
    executor = GatedExecutor()
    engine = engine_on(overlap, clock, executor, max_concurrent_runs=100, batch_size=4)
    engines.append(engine)
    await engine.start()

    async def all_called() -> bool:
        return executor.running == 30

    await eventually(all_called, "every task's call")
    # The pass's first claim goes alone (most passes find a few runs or none); once
    # one came back full, two are under way, never more.
    assert overlap.first_alone
    assert overlap.most == 2
    executor.gate.set()

    await every_task_run(store, tasks)
    assert await runs_of(store, tasks) == [1] * 30


async def test_claims_under_way_together_stay_under_the_ceiling(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    tasks = [await store.create_task(make_task()) for _ in range(30)]
    overlap = OverlapStore(store)
    executor = GatedExecutor()
    engine = engine_on(overlap, clock, executor, max_concurrent_runs=14, batch_size=4)
    engines.append(engine)
    await engine.start()

    async def ceiling_reached() -> bool:
        return executor.running == 14

    await eventually(ceiling_reached, "the ceiling's worth of calls")
    await asyncio.sleep(0.05)  # room for a claim beyond the ceiling, were one made
    assert executor.running == 14
    assert overlap.most == 2
    # A claim beside another takes a whole chunk (4) or is not made: the 2 slots left
    # beside a claim of 4 under way wait for it to land rather than make a claim of 2.
    assert overlap.limits_beside and set(overlap.limits_beside) == {4}
    executor.gate.set()

    await every_task_run(store, tasks)
    assert executor.most == 14
    assert await runs_of(store, tasks) == [1] * 30


async def test_a_claim_that_fails_beside_another_loses_none_of_the_others_runs(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    tasks = [await store.create_task(make_task()) for _ in range(30)]
    overlap = OverlapStore(store)
    overlap.fail_call = 2  # the first of the first pair under way: it fails first
    engine = engine_on(overlap, clock, NoopExecutor(clock), max_concurrent_runs=100, batch_size=4)
    engines.append(engine)
    await engine.start()

    await every_task_run(store, tasks)
    assert overlap.failed_beside_another
    # The claim that landed beside the failure was called, not left to its lease.
    assert await runs_of(store, tasks) == [1] * 30
    for task in tasks:
        [run] = await store.list_runs(task.id, None, None, 10)
        assert run.status is RunStatus.SUCCEEDED


async def test_a_stop_gives_up_claims_that_hang_and_keeps_what_was_claimed(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    tasks = [await store.create_task(make_task()) for _ in range(30)]
    overlap = OverlapStore(store)
    overlap.hang_from = 3
    engine = engine_on(
        overlap,
        clock,
        NoopExecutor(clock),
        max_concurrent_runs=100,
        batch_size=4,
        drain_timeout=0.2,
    )
    engines.append(engine)
    await engine.start()

    async def both_hang() -> bool:
        return overlap.hanging == 2

    await eventually(both_hang, "two claims hanging")
    await engine.stop()
    # The two claims that landed (4 tasks each) ran; the hanging ones claimed nothing,
    # so their tasks are still due, for another replica or the next start.
    counts = await runs_of(store, tasks)
    assert sorted(counts) == [0] * 22 + [1] * 8
    for task in tasks:
        runs = await store.list_runs(task.id, None, None, 10)
        assert all(run.status is RunStatus.SUCCEEDED for run in runs)
        stored = await store.get_task(task.id)
        assert (stored.next_run_at == T0) is (not runs)
