"""What the native engine tells its observer and writes to its structured logs."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore, NoopExecutor
from application.backfills import BackfillService
from application.engine import TriggerLoop
from domain.backfills import BackfillRequest
from domain.runs import RunStatus
from domain.triggers import CronTrigger, IntervalTrigger
from tests.application.engine_support import (
    T0,
    BrokenExecutor,
    RecordingObserver,
    call_held,
    finished_runs,
    settings,
)
from tests.application.engine_support import clock as clock  # fixtures
from tests.application.engine_support import engines as engines
from tests.application.engine_support import store as store
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually


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
    assert fields["recorded"] is True
    assert line.getMessage() == "run succeeded"
    assert line.levelno == logging.INFO


async def test_a_failed_run_is_logged_as_a_warning(
    store: InMemoryTaskStore,
    clock: FakeClock,
    engines: list[TriggerLoop],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # So that SCHEDULER_LOG_LEVEL=WARNING keeps every run that did not succeed.
    caplog.set_level(logging.WARNING, logger="scheduler.engine")
    task = await store.create_task(make_task())
    engine = TriggerLoop(store, store.new_waker(), BrokenExecutor(clock), clock, settings())
    engines.append(engine)
    await engine.start()
    [run] = await eventually(lambda: finished_runs(store, task), "the run")

    [line] = [r for r in caplog.records if r.getMessage() == "run failed"]
    assert getattr(line, "run_id", None) == str(run.id)
    assert line.levelno == logging.WARNING


async def test_an_outcome_that_could_not_be_recorded_is_not_logged_as_the_runs(
    store: InMemoryTaskStore,
    clock: FakeClock,
    engines: list[TriggerLoop],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The process is paused past the run's lease during its call (the fake clock jumps):
    # the call succeeded, but the outcome is the lost-run sweep's to record, not this
    # engine's, and the log must not say the run succeeded.
    caplog.set_level(logging.INFO, logger="scheduler.engine")
    task = await store.create_task(make_task())
    executor, _, run = await call_held(store, clock, engines, task)
    assert run.lease_expires_at is not None
    clock.set(run.lease_expires_at + timedelta(seconds=1))
    executor.gate.set()

    async def logged() -> list[logging.LogRecord]:
        ended = [r for r in caplog.records if getattr(r, "run_id", None) == str(run.id)]
        return [r for r in ended if hasattr(r, "recorded")]

    [line] = await eventually(logged, "the run's log line")
    assert line.getMessage() == "call succeeded; outcome not recorded"
    assert line.__dict__["recorded"] is False
    assert line.__dict__["status"] == "succeeded"  # the call's result
    # Why, as a warning: the zombie rule at work is no error to page anyone about.
    [why] = [r for r in caplog.records if "lease expired" in r.getMessage()]
    assert why.levelno == logging.WARNING and getattr(why, "run_id", None) == str(run.id)


async def test_a_cancelled_run_is_logged_as_information_not_a_warning(
    store: InMemoryTaskStore,
    clock: FakeClock,
    engines: list[TriggerLoop],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A cancel was asked for (through the store, as POST /runs/{id}/cancel asks): a level
    # of WARNING keeps the failures, not every replaced or cancelled run.
    caplog.set_level(logging.INFO, logger="scheduler.engine")
    task = await store.create_task(make_task())
    _, _, run = await call_held(store, clock, engines, task)
    await store.request_cancel(run.id, "cancelled by a test")

    async def logged() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.getMessage() == "run cancelled"]

    [line] = await eventually(logged, "the cancelled run's line")
    assert line.levelno == logging.INFO and getattr(line, "run_id", None) == str(run.id)


async def test_a_backfilled_run_is_late_from_its_backfill_not_from_its_occurrence(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    # Its occurrence is days ago on purpose: counted from there, every backfill set off
    # the lateness alarm (scheduler_fire_lateness_seconds, docs/operations.md).
    observer = RecordingObserver()
    daily = await store.create_task(make_task(CronTrigger(expression="0 0 * * *"), due=None))
    engine = TriggerLoop(store, store.new_waker(), NoopExecutor(clock), clock, settings(), observer)
    engines.append(engine)
    await engine.start()
    find: Any = store.get_task  # by id only; the use case is given an id
    backfills = BackfillService(store.backfills, find, clock, engine, replica="api")
    midnight = T0.replace(hour=0, minute=0, second=0)
    await backfills.backfill(
        daily.id, BackfillRequest(midnight - timedelta(days=3), midnight - timedelta(days=3))
    )

    async def started() -> bool:
        return len(observer.started) == 1

    await eventually(started, "the backfilled run to start")
    assert observer.started[0].run.backfill_id is not None
    assert 0 <= observer.lateness[0] < 60
