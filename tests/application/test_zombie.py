"""The zombie rule (docs/api.md "Run"): a replica that was paused, or starved, past a
run's lease acts on nothing it no longer holds. It does not start the call, it does not
record the outcome of a call that ended after the lease, and a call never outlives the
lease; the lost-run sweep records such a run "replica lost", and nothing overwrites it."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore, NoopExecutor
from application.engine import TriggerLoop
from application.engine_runs import LEASE_ERROR
from domain.claims import LEASE_MARGIN, lease_duration
from domain.runs import REPLICA_LOST, RunOutcome, RunStatus
from domain.triggers import IntervalTrigger
from tests.application.engine_support import (
    CountingStore,
    GatedExecutor,
    call_held,
    finished_runs,
    settings,
)
from tests.application.engine_support import clock as clock  # fixtures
from tests.application.engine_support import engines as engines
from tests.application.engine_support import store as store
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually


async def test_a_run_whose_lease_expired_before_its_call_is_not_called(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    task = await store.create_task(make_task(IntervalTrigger(every=3600), enabled=False))
    executor = NoopExecutor(clock)
    engine = TriggerLoop(store, store.new_waker(), executor, clock, settings())
    engines.append(engine)
    await engine.start()
    # A claim whose transaction committed only after its process woke from a long pause.
    claimed = await store.start_manual_run(task.id, clock.now() - timedelta(hours=1), "unit")
    assert claimed.should_call
    engine.dispatch(claimed)

    async def done() -> bool:
        return engine.in_flight == 0

    await eventually(done, "the run to be given up")
    assert executor.executed == 0
    await store.expire_lost_runs(clock.now())  # if this replica's own sweep did not yet
    lost = await store.get_run(claimed.run.id)
    assert (lost.status, lost.error, lost.attempts) == (RunStatus.FAILED, REPLICA_LOST, 0)


async def test_an_outcome_after_the_lease_is_not_recorded_and_never_overwrites(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    task = await store.create_task(
        make_task(IntervalTrigger(every=3600))
    )  # nothing else due meanwhile
    executor, engine, running = await call_held(store, clock, engines, task)
    assert running.lease_expires_at is not None
    clock.set(running.lease_expires_at + timedelta(seconds=1))  # the process slept
    executor.gate.set()  # the target answers 2xx, too late

    async def done() -> bool:
        return engine.in_flight == 0

    await eventually(done, "the call to end")
    assert executor.executed == 1
    [run] = await store.list_runs(task.id, None, None, 10)
    assert run.status is not RunStatus.SUCCEEDED  # still running, or swept already
    await store.expire_lost_runs(clock.now())
    [lost] = await finished_runs(store, task)
    assert (lost.status, lost.error) == (RunStatus.FAILED, REPLICA_LOST)
    # However late the zombie's write arrives, the recorded outcome stands.
    late = RunOutcome(status=RunStatus.SUCCEEDED, attempts=1, finished_at=clock.now())
    [kept] = await store.finish_runs([(lost.id, late)])
    assert (kept.status, kept.error) == (RunStatus.FAILED, REPLICA_LOST)


async def test_a_call_that_started_late_ends_before_its_lease(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    # A target timeout of 300 s: a call given its own timeout (or a whole lease) would
    # outlast eventually's deadline (WAIT, 30 s) tenfold.
    task = await store.create_task(
        make_task(IntervalTrigger(every=3600), enabled=False, timeout=300)
    )
    executor = GatedExecutor()  # a target that never answers
    engine = TriggerLoop(store, store.new_waker(), executor, clock, settings())
    engines.append(engine)
    await engine.start()
    # Claimed long enough ago that, past its timeouts, one second of its lease is left
    # before half the margin: the call gets that second, not a whole lease of its own.
    ago = lease_duration(task.target) - LEASE_MARGIN / 2 - timedelta(seconds=1)
    claimed = await store.start_manual_run(task.id, clock.now() - ago, "unit")
    engine.dispatch(claimed)
    [run] = await eventually(lambda: finished_runs(store, task), "the stopped call")
    assert (run.status, run.error) == (RunStatus.FAILED, LEASE_ERROR)


async def test_a_retry_after_a_wait_that_outlived_the_lease_is_not_sent(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    task = await store.create_task(make_task(IntervalTrigger(every=3600)))
    counting = CountingStore(store)
    counting.failing_finishes = 1  # the first write fails while the lease still holds
    engine = TriggerLoop(
        counting,
        store.new_waker(),
        NoopExecutor(clock),
        clock,
        settings(store_retry_initial=1.0, store_retry_max=1.0),
    )
    engines.append(engine)
    await engine.start()

    async def failed_once() -> bool:
        return counting.failing_finishes == 0

    await eventually(failed_once, "the failed write")
    [run] = await store.list_runs(task.id, None, None, 10)
    assert run.lease_expires_at is not None
    # During the 1 s wait before the retry, the lease runs out (the outage went on).
    asyncio.get_running_loop().call_later(0.05, clock.set, run.lease_expires_at)

    async def done() -> bool:
        return engine.in_flight == 0

    await eventually(done, "the outcome to be given up")
    assert counting.batches == []  # the retry was never sent
