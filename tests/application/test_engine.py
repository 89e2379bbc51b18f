"""What only the native engine promises, beyond the contract: store outages, its
ceiling on runs in flight, the observer, structured logs, the retention sweep."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

import pytest

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore, NoopExecutor
from application.engine import TriggerLoop
from application.engine_settings import EngineSettings
from domain.runs import ClaimedRun, RunOutcome, RunStatus
from domain.triggers import IntervalTrigger
from tests.application.engine_support import (
    T0,
    BrokenExecutor,
    CountingStore,
    FlakyStore,
    GatedExecutor,
    RecordingObserver,
    finished_runs,
    settings,
)
from tests.application.engine_support import clock as clock  # fixtures
from tests.application.engine_support import engines as engines
from tests.application.engine_support import store as store
from tests.fixtures.runs import finish_one
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
        await eventually(lambda task=task: finished_runs(store, task), "the run", within=5)
    assert sum(counting.batches) == 3


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


async def test_stop_records_every_outcome_at_once(
    store: InMemoryTaskStore, clock: FakeClock
) -> None:
    executor = GatedExecutor()
    tasks = [await store.create_task(make_task()) for _ in range(5)]
    # Outcomes would wait a minute for company; stopping sends them at once.
    engine = TriggerLoop(
        store,
        store.new_waker(),
        executor,
        clock,
        settings(record_delay=60.0, record_batch_size=1000),
    )
    await engine.start()

    async def all_called() -> bool:
        return executor.running == 5

    await eventually(all_called, "five calls")
    executor.gate.set()
    began = time.monotonic()
    await engine.stop()
    assert time.monotonic() - began < 5
    for task in tasks:
        [run] = await finished_runs(store, task)
        assert run.status is RunStatus.SUCCEEDED


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


async def test_the_observer_sees_batches_runs_and_in_flight(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    observer = RecordingObserver()
    running = await store.create_task(make_task())
    missed = await store.create_task(
        make_task(
            IntervalTrigger(every=3600), now=T0 - timedelta(seconds=30), misfire_grace_seconds=10
        )
    )
    engine = TriggerLoop(store, store.new_waker(), NoopExecutor(clock), clock, settings(), observer)
    engines.append(engine)
    await engine.start()
    await eventually(lambda: finished_runs(store, running), "the run")

    async def both_reported() -> bool:
        return len(observer.finished) == 2

    await eventually(both_reported, "both outcomes")
    assert 2 in observer.batches
    assert [c.task.id for c in observer.started] == [running.id]
    by_task = {run.task_id: run.status for run in observer.finished}
    assert by_task == {running.id: RunStatus.SUCCEEDED, missed.id: RunStatus.MISSED}
    assert observer.in_flight_counts[0] == 1 and observer.in_flight_counts[-1] == 0


async def test_each_run_is_logged_with_its_fields(
    store: InMemoryTaskStore,
    clock: FakeClock,
    engines: list[TriggerLoop],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="scheduler.engine")
    task = await store.create_task(make_task())
    engine = TriggerLoop(store, store.new_waker(), NoopExecutor(clock), clock, settings())
    engines.append(engine)
    await engine.start()
    [run] = await eventually(lambda: finished_runs(store, task), "the run")
    [batch] = [r for r in caplog.records if getattr(r, "count", None) == 1]
    assert (batch.running, batch.missed, batch.skipped) == (1, 0, 0)  # type: ignore[attr-defined]
    [line] = [r for r in caplog.records if getattr(r, "run_id", None) == str(run.id)]
    fields = line.__dict__
    assert fields["task_id"] == str(task.id)
    assert fields["scheduled_for"] == T0.isoformat()
    assert fields["status"] == "succeeded"
    assert fields["lateness"] == 0
    assert fields["duration"] >= 0


async def test_the_retention_sweep_deletes_old_runs_and_task_versions(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    task = await store.create_task(make_task(now=T0 - timedelta(days=40)))
    [claimed] = await store.claim_due(T0 - timedelta(days=40), 10, "old")
    await finish_one(store, claimed.run.id, RunOutcome(status=RunStatus.SUCCEEDED, finished_at=T0))
    paused = (await store.get_task(task.id)).model_copy(
        update={"enabled": False, "next_fire_at": None, "next_run_at": None}
    )
    await store.update_task(paused, 1, reschedule=True)
    engine = TriggerLoop(
        store,
        store.new_waker(),
        NoopExecutor(clock),
        clock,
        settings(retention_batch_size=1),
    )
    engines.append(engine)
    await engine.start()

    async def gone() -> bool:
        return await store.list_runs(task.id, None, None, 10) == []

    await eventually(gone, "the old run to be deleted")

    # Task history goes with them, but for the version in force at the cutoff.
    async def superseded_gone() -> bool:
        versions = await store.task_history(task.id, None, 10)
        return [v.version for v in versions] == [2]

    await eventually(superseded_gone, "the superseded task version to be deleted")


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
