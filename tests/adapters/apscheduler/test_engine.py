"""What only the APScheduler engine does: task rows become APScheduler schedules and
stay in step with them through the use cases, APScheduler's own timer fires them on
the wall clock, and a burst of schedules costs few claims. The shared behaviour is the
engine contract (tests/application/test_engine_contract.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

import pytest

from tests.adapters.apscheduler.support import require_apscheduler

require_apscheduler()

from apscheduler import JobOutcome, JobReleased, Schedule  # noqa: E402

from adapters.apscheduler import APSchedulerEngine  # noqa: E402
from adapters.apscheduler.sync import EXECUTE  # noqa: E402
from adapters.apscheduler.triggers import DomainTrigger  # noqa: E402
from adapters.clock import FakeClock, SystemClock  # noqa: E402
from adapters.memory import InMemoryTaskStore, NoopExecutor  # noqa: E402
from application.engine_settings import EngineSettings  # noqa: E402
from application.ports import Clock  # noqa: E402
from application.scheduling import SchedulingService  # noqa: E402
from domain.errors import StoreUnavailable  # noqa: E402
from domain.instants import truncate  # noqa: E402
from domain.runs import ClaimedRun, Run, RunStatus  # noqa: E402
from domain.tasks import HttpTarget, Task, TaskSpec  # noqa: E402
from domain.triggers import CronTrigger, IntervalTrigger, OneShotTrigger, Trigger  # noqa: E402
from entrypoints.container import build_container  # noqa: E402
from entrypoints.settings import load_settings  # noqa: E402
from tests.fixtures.waiting import eventually  # noqa: E402

T0 = datetime(2026, 3, 2, 12, tzinfo=UTC)
DAILY = CronTrigger(expression="0 4 * * *", timezone="Europe/Berlin")
T = TypeVar("T")


class FlakyStore(InMemoryTaskStore):
    """The in-memory store, counting claims and failing them while `failing`."""

    def __init__(self) -> None:
        super().__init__()
        self.claims = 0
        self.failing = False

    async def claim_due(self, now: datetime, limit: int, replica: str) -> list[ClaimedRun]:
        self.claims += 1
        if self.failing:
            raise StoreUnavailable()
        return await super().claim_due(now, limit, replica)


@dataclass
class Setup:
    clock: Clock
    store: FlakyStore
    engine: APSchedulerEngine
    service: SchedulingService

    async def create(self, trigger: Trigger, name: str, **fields: Any) -> Task:
        spec = TaskSpec(
            name=name, trigger=trigger, target=HttpTarget(url="http://127.0.0.1:9/"), **fields
        )
        return await self.service.create_task(spec)

    async def schedules(self) -> dict[UUID, Schedule]:
        scheduler = self.engine.scheduler
        assert scheduler is not None
        return {UUID(s.id): s for s in await scheduler.get_schedules()}

    async def runs(self, task: Task) -> list[Run]:
        return await self.store.list_runs(task.id, None, None, 100)


async def _setup(clock: Clock) -> AsyncIterator[Setup]:
    store = FlakyStore()
    settings = EngineSettings(replica="aps-1", store_retry_initial=0.05, store_retry_max=0.2)
    engine = APSchedulerEngine(store, store.new_waker(), NoopExecutor(clock), clock, settings)
    service = SchedulingService(store, NoopExecutor(clock), clock, engine, replica="api")
    try:
        yield Setup(clock, store, engine, service)
    finally:
        await engine.stop()


@pytest.fixture
async def wall() -> AsyncIterator[Setup]:
    """On the system clock, as in production: no shift between our time and APScheduler's."""
    async for setup in _setup(SystemClock()):
        yield setup


@pytest.fixture
async def fake() -> AsyncIterator[Setup]:
    async for setup in _setup(FakeClock(T0)):
        yield setup


async def started(setup: Setup) -> None:
    await setup.engine.start()

    async def alive() -> bool:
        return setup.engine.alive

    await eventually(alive, "the engine to start")


async def test_schedules_mirror_the_task_rows_at_start(wall: Setup) -> None:
    daily = await wall.create(DAILY, "daily", jitter_seconds=600)
    paused = await wall.service.pause_task((await wall.create(DAILY, "paused")).id)
    await started(wall)

    async def mirrored() -> dict[UUID, Schedule]:
        schedules = await wall.schedules()
        return schedules if daily.id in schedules else {}

    schedules = await eventually(mirrored, "the daily task's schedule")
    assert set(schedules) == {daily.id}
    assert paused.id not in schedules
    schedule = schedules[daily.id]
    # Only the task id reaches APScheduler; the fire time is the row's, to the second.
    assert (schedule.task_id, schedule.args, schedule.kwargs) == (
        EXECUTE,
        (),
        {"task_id": str(daily.id)},
    )
    assert isinstance(schedule.trigger, DomainTrigger)
    assert schedule.trigger.shift == timedelta(0)
    assert schedule.next_fire_time == daily.next_run_at


async def test_use_cases_keep_the_schedules_in_step(wall: Setup) -> None:
    await started(wall)
    task = await wall.create(DAILY, "kept-in-step")

    async def schedule_is(check: Callable[[Schedule | None], bool], what: str) -> None:
        async def probe() -> bool:
            return check((await wall.schedules()).get(task.id))

        await eventually(probe, what)

    await schedule_is(lambda s: s is not None and s.next_fire_time == task.next_run_at, "added")

    hourly = {"kind": "cron", "expression": "15 * * * *", "timezone": "UTC"}
    changed = await wall.service.update_task(task.id, {"trigger": hourly})
    assert changed.next_run_at != task.next_run_at
    await schedule_is(
        lambda s: s is not None and s.next_fire_time == changed.next_run_at, "the new trigger"
    )

    await wall.service.pause_task(task.id)
    await schedule_is(lambda s: s is not None and s.paused, "paused")

    resumed = await wall.service.resume_task(task.id)
    await schedule_is(
        lambda s: s is not None and not s.paused and s.next_fire_time == resumed.next_run_at,
        "resumed",
    )

    await wall.service.delete_task(task.id)
    await schedule_is(lambda s: s is None, "removed")


async def test_apscheduler_fires_on_the_wall_clock(wall: Setup) -> None:
    await started(wall)
    scheduler = wall.engine.scheduler
    assert scheduler is not None
    released: list[JobReleased] = []
    scheduler.subscribe(released.append, JobReleased)
    run_at = truncate(datetime.now(UTC)) + timedelta(seconds=2)
    task = await wall.create(OneShotTrigger(run_at=run_at), "soon")

    async def finished() -> list[Run]:
        return [r for r in await wall.runs(task) if r.status.finished]

    [run] = await eventually(finished, "the one-shot's run")
    assert (run.status, run.scheduled_for, run.replica) == (RunStatus.SUCCEEDED, run_at, "aps-1")
    assert run.claimed_at >= run_at
    fired = [e for e in released if e.schedule_id == str(task.id)]
    assert [(e.task_id, e.outcome, e.scheduled_start) for e in fired] == [
        (EXECUTE, JobOutcome.success, run_at)
    ]
    assert fired[0].started_at is not None and fired[0].started_at >= run_at


async def test_a_burst_of_schedules_costs_few_claims(fake: Setup) -> None:
    tasks = [
        await fake.create(IntervalTrigger(every=3600), f"burst-{i}", max_running_instances=2)
        for i in range(60)
    ]
    assert isinstance(fake.clock, FakeClock)
    fake.clock.set(T0 + timedelta(hours=1))
    await started(fake)

    async def all_ran() -> bool:
        return all([await fake.runs(task) for task in tasks])

    await eventually(all_ran, "a run of every task")
    assert fake.store.claims <= 5


async def test_a_failing_claim_is_retried_and_reported_unready(fake: Setup) -> None:
    await started(fake)
    later = IntervalTrigger(every=60, start_at=T0 + timedelta(minutes=1))
    task = await fake.create(later, "flaky")
    await eventually(lambda: _has_schedule(fake, task), "the schedule")
    fake.store.failing = True
    assert isinstance(fake.clock, FakeClock)
    fake.clock.set(T0 + timedelta(minutes=1))

    async def unready() -> bool:
        return not fake.engine.alive

    await eventually(unready, "the engine to report the failing store")
    failed = fake.store.claims
    await eventually(lambda: _more_claims(fake, failed), "a retry")
    fake.store.failing = False

    async def ran() -> list[Run]:
        return [r for r in await fake.runs(task) if r.status.finished]

    [run] = await eventually(ran, "the claim to succeed")
    assert (run.status, run.scheduled_for) == (RunStatus.SUCCEEDED, T0 + timedelta(minutes=1))
    await started(fake)


async def _has_schedule(setup: Setup, task: Task) -> bool:
    return task.id in await setup.schedules()


async def _more_claims(setup: Setup, than: int) -> bool:
    return setup.store.claims > than


def test_the_container_selects_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEDULER_ENGINE", "apscheduler")
    monkeypatch.delenv("SCHEDULER_DATABASE_URL", raising=False)
    assert isinstance(build_container().engine(), APSchedulerEngine)
    native = build_container(load_settings(engine="native")).engine()
    assert not isinstance(native, APSchedulerEngine)
