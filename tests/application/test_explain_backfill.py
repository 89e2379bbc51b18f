"""Explain with backfills (docs/api.md, "Explain"): a backfill's run stands for the
occurrence it re-ran, after a scheduled run that failed, and also for an occurrence the
task was not scheduled for (paused then, or not created yet)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore
from application.scheduling import SchedulingService
from domain.explain import Verdict
from domain.runs import Run, RunOutcome, RunStatus
from domain.tasks import Task
from tests.application.test_explain import MINUTE, MINUTELY, REPLICA, SECOND, succeeded
from tests.application.test_scheduling import T0
from tests.application.test_scheduling import clock as clock  # fixtures
from tests.application.test_scheduling import service as service
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import task_spec


async def backfilled(store: InMemoryTaskStore, task: Task, at: datetime, now: datetime) -> Run:
    """Backfill the occurrence at `at` (`allow_all`, so it starts) and let it succeed."""
    made = await store.backfills.backfill(
        task.id, uuid4(), [at], "allow_all", False, now, REPLICA, False
    )
    run = made.made[0].run
    await finish_one(store, run.id, succeeded(now + SECOND))
    return await store.get_run(run.id)


async def test_a_backfilled_run_stands_for_an_occurrence_that_failed(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    task = await service.create_task(task_spec(**MINUTELY))
    [claimed] = await memory_store.claim_due(T0, 10, REPLICA)
    failed = RunOutcome(status=RunStatus.FAILED, attempts=1, error="HTTP 500", finished_at=T0)
    await finish_one(memory_store, claimed.run.id, failed)
    clock.set(T0 + 30 * SECOND)
    run = await backfilled(memory_store, task, T0, T0 + 10 * SECOND)

    answer = await service.explain("minutely", T0 + 30 * SECOND)

    assert (answer.occurrence, answer.verdict) == (T0, Verdict.RAN)
    assert [r.id for r in answer.runs] == [run.id, claimed.run.id]
    assert answer.detail == (
        f"ran: run {run.id} succeeded after 1 attempt (backfill {run.backfill_id}; "
        f"before it, run {claimed.run.id}: failed)"
    )


async def test_an_occurrence_before_the_task_existed_that_a_backfill_ran(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    # Every minute by the clock: it has fire times before the task was created.
    cron = {"kind": "cron", "expression": "* * * * *", "timezone": "UTC"}
    task = await service.create_task(task_spec(**(MINUTELY | {"trigger": cron})))
    clock.set(T0 + 30 * SECOND)
    run = await backfilled(memory_store, task, T0 - 2 * MINUTE, T0 + 10 * SECOND)

    answer = await service.explain("minutely", T0 - 2 * MINUTE + 5 * SECOND)

    assert (answer.occurrence, answer.verdict, answer.task_version) == (
        T0 - 2 * MINUTE,
        Verdict.RAN,
        1,
    )
    assert [r.id for r in answer.runs] == [run.id]
    assert f"(backfill {run.backfill_id})" in answer.detail
    # One the backfill did not cover is still "did not exist".
    before = await service.explain("minutely", T0 - MINUTE + 5 * SECOND)
    assert before.verdict is Verdict.NOT_SCHEDULED and before.runs == []


async def test_an_occurrence_before_the_task_that_a_backfill_ran_under_a_later_trigger(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    """Created hourly at :00, changed to :30, then backfilled before its creation: the
    backfill ran the :30 fire times, and explain finds them under the trigger in force
    when it was made (an audit got "the task did not exist" beside the run)."""
    hourly = {"kind": "cron", "expression": "0 * * * *", "timezone": "UTC"}
    await service.create_task(task_spec(**(MINUTELY | {"trigger": hourly})))
    clock.set(T0 + MINUTE)
    task = await service.update_task("minutely", {"trigger": hourly | {"expression": "30 * * * *"}})
    run = await backfilled(memory_store, task, T0 - 90 * MINUTE, T0 + 2 * MINUTE)
    clock.set(T0 + 3 * MINUTE)

    answer = await service.explain("minutely", T0 - 89 * MINUTE)

    assert (answer.occurrence, answer.verdict, answer.task_version) == (
        T0 - 90 * MINUTE,
        Verdict.RAN,
        2,
    )
    assert [r.id for r in answer.runs] == [run.id]
    # Before the backfill's first occurrence, nothing ran: the task did not exist.
    earlier = await service.explain("minutely", T0 - 91 * MINUTE)
    assert earlier.verdict is Verdict.NOT_SCHEDULED and earlier.runs == []


async def test_an_occurrence_the_task_was_paused_for_that_a_backfill_ran(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    task = await service.create_task(task_spec(**MINUTELY))
    clock.set(T0 + 10 * SECOND)
    await service.pause_task("minutely")
    clock.set(T0 + 200 * SECOND)
    await service.resume_task("minutely")
    run = await backfilled(memory_store, task, T0 + MINUTE, T0 + 210 * SECOND)

    answer = await service.explain("minutely", T0 + 70 * SECOND)

    assert (answer.occurrence, answer.verdict) == (T0 + MINUTE, Verdict.RAN)
    assert [r.id for r in answer.runs] == [run.id]


async def test_a_dst_gap_before_the_task_existed_is_not_the_backfilled_day_before(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    # 02:30 New York did not exist on 2026-03-08; under `gap: skip` nothing fired. A
    # backfill over those days ran the 7th and the 9th: the 8th is still dst_skipped.
    clock.set(datetime(2026, 3, 20, tzinfo=UTC))
    trigger = {
        "kind": "cron",
        "expression": "30 2 * * *",
        "timezone": "America/New_York",
        "dst": {"gap": "skip"},
    }
    task = await service.create_task(task_spec(name="gap", trigger=trigger))
    now = datetime(2026, 3, 20, 0, 1, tzinfo=UTC)
    await backfilled(memory_store, task, datetime(2026, 3, 7, 7, 30, tzinfo=UTC), now)
    await backfilled(memory_store, task, datetime(2026, 3, 9, 6, 30, tzinfo=UTC), now)

    answer = await service.explain("gap", datetime(2026, 3, 8, 8, 0, tzinfo=UTC))

    assert answer.verdict is Verdict.DST_SKIPPED, answer.detail
    assert answer.detail.startswith("dst_skipped: 2026-03-08 02:30:00 did not exist")
    after = await service.explain("gap", datetime(2026, 3, 9, 7, 0, tzinfo=UTC))
    assert after.verdict is Verdict.RAN
