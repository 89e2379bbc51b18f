"""The native engine under store outages: retried, firing resumes, outcomes kept or given up."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore, NoopExecutor
from application.claim_pass import FAILING_GRACE, FailingSpell
from application.engine import TriggerLoop
from domain.runs import RunStatus
from domain.triggers import IntervalTrigger
from tests.application.engine_support import (
    CountingStore,
    FlakyStore,
    RecordingObserver,
    StuckStore,
    finished_runs,
    settings,
)
from tests.application.engine_support import clock as clock  # fixtures
from tests.application.engine_support import engines as engines
from tests.application.engine_support import store as store
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually


async def test_a_store_outage_is_retried_and_firing_resumes(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    flaky = FlakyStore(store)
    flaky.down = True
    observer = RecordingObserver()
    engine = TriggerLoop(flaky, store.new_waker(), NoopExecutor(clock), clock, settings(), observer)
    engines.append(engine)
    await engine.start()

    async def retried() -> bool:
        return len(observer.errors) >= 3

    await eventually(retried, "several retries")
    assert not engine.alive
    task = await store.create_task(make_task())
    flaky.down = False

    async def alive() -> bool:
        return engine.alive

    await eventually(alive, "the engine to recover")
    runs = await eventually(lambda: finished_runs(store, task), "the run")
    assert runs[0].status is RunStatus.SUCCEEDED


async def test_an_outcome_is_recorded_once_the_store_is_back(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    flaky = FlakyStore(store)
    flaky.failing_finishes = 3
    engine = TriggerLoop(flaky, store.new_waker(), NoopExecutor(clock), clock, settings())
    engines.append(engine)
    task = await store.create_task(make_task())
    await engine.start()
    [run] = await eventually(lambda: finished_runs(store, task), "the recorded run")
    assert run.status is RunStatus.SUCCEEDED
    assert flaky.failing_finishes == 0


async def test_a_failed_batch_is_retried_whole(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    counting = CountingStore(store)
    counting.failing_finishes = 3
    observer = RecordingObserver()
    tasks = [await store.create_task(make_task()) for _ in range(12)]
    engine = TriggerLoop(
        counting, store.new_waker(), NoopExecutor(clock), clock, settings(), observer
    )
    engines.append(engine)
    await engine.start()

    async def all_recorded() -> bool:
        # The observer hears of a run after its batch is written: wait for both.
        return sum(counting.batches) == 12 and len(observer.finished) == 12

    await eventually(all_recorded, "every outcome, once the store is back")
    assert counting.failing_finishes <= 0
    assert len(observer.errors) >= 3
    for task in tasks:
        [run] = await finished_runs(store, task)
        assert run.status is RunStatus.SUCCEEDED
    assert {r.status for r in observer.finished} == {RunStatus.SUCCEEDED}
    assert len(observer.finished) == 12


async def test_an_outcome_is_given_up_once_the_lease_expired(
    store: InMemoryTaskStore,
    clock: FakeClock,
    engines: list[TriggerLoop],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="scheduler.engine")
    counting = CountingStore(store)
    counting.failing_finishes = 10**6
    task = await store.create_task(
        make_task(IntervalTrigger(every=3600))
    )  # nothing else due meanwhile
    engine = TriggerLoop(counting, store.new_waker(), NoopExecutor(clock), clock, settings())
    engines.append(engine)
    await engine.start()

    async def retrying() -> bool:
        return any("retrying" in r.getMessage() for r in caplog.records)

    await eventually(retrying, "a failed attempt")
    [running] = await store.list_runs(task.id, None, None, 10)
    assert running.lease_expires_at is not None
    clock.set(running.lease_expires_at)

    async def given_up() -> bool:
        return engine.in_flight == 0

    await eventually(given_up, "the outcome to be given up")
    [line] = [r for r in caplog.records if r.getMessage().startswith("outcome not recorded")]
    assert getattr(line, "run_id", None) == str(running.id)
    assert counting.batches == []
    # Left to the lost-run sweep, as a killed replica's run would be.
    [lost] = await store.expire_lost_runs(running.lease_expires_at + timedelta(seconds=1))
    assert lost.id == running.id


async def test_a_pass_stuck_on_the_store_is_reported_stalled_then_recovers(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    # Neither failed nor done: without this, readiness said "ok" for an engine that
    # claimed nothing while a statement waited on a lock (docs/operations.md).
    stuck = StuckStore(store)
    engine = TriggerLoop(
        stuck, store.new_waker(), NoopExecutor(clock), clock, settings(pass_stall=0.05)
    )
    engines.append(engine)
    await engine.start()

    async def stalled() -> float | None:
        return engine.stalled_for

    assert await eventually(stalled, "the engine to report its pass stalled") > 0.05
    task = await store.create_task(make_task())
    stuck.free.set()

    await eventually(lambda: finished_runs(store, task), "the run, once the pass went on")
    assert engine.stalled_for is None
    assert engine.alive


async def test_a_brief_outage_after_a_pass_leaves_the_engine_ready(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    # A cut connection fails a pass or two; /readyz must not take the replica out of
    # rotation for that (every replica sees the same cut at once).
    flaky = FlakyStore(store)
    observer = RecordingObserver()
    engine = TriggerLoop(flaky, store.new_waker(), NoopExecutor(clock), clock, settings(), observer)
    engines.append(engine)
    await engine.start()
    await eventually(lambda: _alive(engine), "the engine's first pass")

    flaky.down = True
    await store.create_task(make_task())  # wakes the engine: its passes fail, retried
    await eventually(lambda: _errors(observer, 2), "two failed passes")

    assert engine.alive


async def _alive(engine: TriggerLoop) -> bool:
    return engine.alive


async def _errors(observer: RecordingObserver, count: int) -> bool:
    return len(observer.errors) >= count


def test_passes_failing_in_a_row_for_the_grace_make_a_loop_unready() -> None:
    now = [100.0]
    spell = FailingSpell(lambda: now[0])
    assert not spell.healthy  # no pass has succeeded yet
    spell.succeeded()
    spell.failed()
    now[0] += FAILING_GRACE - 0.1
    spell.failed()  # the spell began with the first failure
    assert spell.healthy
    now[0] += 0.1
    assert not spell.healthy and spell.too_long
    spell.succeeded()
    assert spell.healthy
    spell.reset()  # the engine stopped
    assert not spell.healthy
