"""`explain` where a change and an occurrence share a second, where the next run did not
fold the occurrence, and where a run was missed for `max_catch_up` rather than the grace
(found by an outside audit, 2026-12-03). In-memory store, fake clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore
from application.calendars import CalendarService
from application.scheduling import SchedulingService
from domain.calendars import Calendar
from domain.explain import Verdict
from domain.runs import RunStatus
from tests.application.test_explain import MINUTELY, REPLICA, succeeded
from tests.application.test_scheduling import T0
from tests.application.test_scheduling import clock as clock  # fixtures
from tests.application.test_scheduling import service as service
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import task_spec

SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)


async def test_a_resume_in_a_fire_second_did_not_schedule_that_second(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    await service.create_task(task_spec(**MINUTELY))
    clock.set(T0 + 10 * SECOND)
    await service.pause_task("minutely", actor="ops")
    clock.set(T0 + 2 * MINUTE)  # a fire time of the minutely schedule
    resumed = await service.resume_task("minutely", actor="ops")
    assert resumed.next_fire_at == T0 + 3 * MINUTE
    [claimed] = await memory_store.claim_due(T0 + 3 * MINUTE, 10, REPLICA)
    clock.set(T0 + 4 * MINUTE)

    answer = await service.explain("minutely", T0 + 2 * MINUTE + 30 * SECOND)

    assert (answer.occurrence, answer.verdict, answer.runs) == (
        T0 + 2 * MINUTE,
        Verdict.NOT_SCHEDULED,
        [],
    )
    assert answer.detail == (
        "not scheduled: the task was resumed at 2026-03-07T12:02:00Z by token ops, in a "
        "second its schedule fired in, so its schedule started at the next second"
    )
    # The run after it stood for itself only: it is not said to have folded it.
    assert claimed.run.coalesced == 1


async def test_an_occurrence_before_its_trigger_took_effect_was_not_scheduled(
    service: SchedulingService, clock: FakeClock
) -> None:
    await service.create_task(task_spec(**MINUTELY))
    clock.set(T0 + 10 * MINUTE + 30 * SECOND)
    # Every 7 minutes from 12:00:30: 12:07:30 is one of its fire times, before the change,
    # and none of the minutely trigger's then.
    every_seven = {"kind": "interval", "every": 420, "anchor": (T0 + 30 * SECOND).isoformat()}
    await service.update_task("minutely", {"trigger": every_seven}, actor="ops")
    clock.set(T0 + 20 * MINUTE)

    answer = await service.explain("minutely", T0 + 10 * MINUTE + 30 * SECOND)

    assert (answer.occurrence, answer.verdict) == (
        T0 + 7 * MINUTE + 30 * SECOND,
        Verdict.NOT_SCHEDULED,
    )
    assert answer.detail == (
        "not scheduled: the trigger in force at 2026-03-07T12:07:30Z (version 1) had no "
        "fire time then"
    )


async def test_a_run_claimed_before_a_pause_in_its_own_second_ran(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    await service.create_task(task_spec(**MINUTELY))
    clock.set(T0 + MINUTE)
    [claimed] = await memory_store.claim_due(T0 + MINUTE, 10, REPLICA)
    await service.pause_task("minutely", actor="ops")  # the same second
    await finish_one(memory_store, claimed.run.id, succeeded(T0 + MINUTE + SECOND))
    clock.set(T0 + 5 * MINUTE)

    answer = await service.explain("minutely", T0 + MINUTE + 30 * SECOND)

    assert (answer.occurrence, answer.verdict) == (T0 + MINUTE, Verdict.RAN)
    assert [run.id for run in answer.runs] == [claimed.run.id]


async def test_a_run_missed_for_max_catch_up_says_so_not_the_grace(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    spec = task_spec(**MINUTELY, catch_up="all", max_catch_up=2, misfire_grace_seconds=600)
    await service.create_task(spec)
    claimed = await memory_store.claim_due(T0 + 4 * MINUTE, 10, REPLICA)
    [missed] = [c.run for c in claimed if c.run.status is RunStatus.MISSED]
    assert missed.coalesced == 3  # 12:00 to 12:02; 12:03 and 12:04 run
    for each in claimed:
        if each.run.status is RunStatus.RUNNING:
            await finish_one(memory_store, each.run.id, succeeded(T0 + 4 * MINUTE))
    clock.set(T0 + 10 * MINUTE)

    answer = await service.explain("minutely", T0 + 2 * MINUTE)
    folded = await service.explain("minutely", T0)

    assert (answer.verdict, answer.runs) == (Verdict.MISSED, [missed])
    assert answer.detail == (
        "missed: claimed 120 s after 2026-03-07T12:02:00Z, older than the newest "
        "max_catch_up = 2 occurrences of the backlog (catch_up all)"
    )
    assert (folded.verdict, [run.id for run in folded.runs]) == (Verdict.MISSED, [missed.id])
    assert folded.detail.startswith(f"missed: folded into missed run {missed.id}, claimed 120 s")


async def test_a_pause_is_told_right_however_many_versions_came_after_it(
    service: SchedulingService, clock: FakeClock
) -> None:
    # explain once read only the newest 1,000 versions and took the oldest of those for
    # the one that resumed the task.
    await service.create_task(task_spec(**MINUTELY), actor="deploy")
    clock.set(T0 + 10 * SECOND)
    await service.pause_task("minutely", actor="ops")
    clock.set(T0 + 200 * SECOND)
    await service.resume_task("minutely", actor="ops")
    for n in range(1_005):
        clock.set(T0 + 300 * SECOND + n * SECOND)
        await service.update_task("minutely", {"description": f"edit {n}"}, actor="deploy")

    answer = await service.explain("minutely", T0 + 70 * SECOND)

    assert answer.detail == (
        "not scheduled: the task was paused from 2026-03-07T12:00:10Z "
        "to 2026-03-07T12:03:20Z by token ops"
    )


async def test_a_folded_occurrence_is_found_however_many_runs_came_after(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    # explain once read the newest 500 runs after the occurrence and took the oldest of
    # those for the next one: a task firing every second called a folded occurrence
    # "missed" once 500 runs had followed it.
    every_second = {
        **MINUTELY,
        "trigger": {"kind": "interval", "every": 1, "anchor": T0.isoformat()},
    }
    await service.create_task(task_spec(**every_second, misfire_grace_seconds=None))
    [folding] = await memory_store.claim_due(T0 + 2 * SECOND, 10, REPLICA)
    assert folding.run.coalesced == 3
    for n in range(3, 603):
        await memory_store.claim_due(T0 + n * SECOND, 10, REPLICA)
    clock.set(T0 + 700 * SECOND)

    answer = await service.explain("minutely", T0 + SECOND)

    assert (answer.occurrence, answer.verdict) == (T0 + SECOND, Verdict.COALESCED)
    assert [run.id for run in answer.runs] == [folding.run.id]


async def test_a_date_of_a_calendar_deleted_since_is_not_called_simply_missed(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    # 2026-03-08 was a holiday of the calendar the trigger excluded; the calendar has
    # gone since, and calendars keep no history: explain cannot tell, and says so.
    calendars = CalendarService(memory_store, clock)
    await calendars.create(Calendar(name="holidays", dates=["2026-03-08"]))
    trigger = {"kind": "cron", "expression": "0 9 * * *"}
    excluding = trigger | {"calendar": {"name": "holidays", "policy": "exclude"}}
    await service.create_task(task_spec(name="daily", trigger=excluding))
    [ran] = await memory_store.claim_due(datetime(2026, 3, 9, 9, tzinfo=UTC), 10, REPLICA)
    assert ran.run.scheduled_for == datetime(2026, 3, 9, 9, tzinfo=UTC)  # the 8th held
    clock.set(datetime(2026, 3, 9, 10, tzinfo=UTC))
    await service.update_task("daily", {"trigger": trigger})
    await calendars.delete("holidays")

    answer = await service.explain("daily", datetime(2026, 3, 8, 10, tzinfo=UTC))

    assert (answer.occurrence, answer.verdict) == (
        datetime(2026, 3, 8, 9, tzinfo=UTC),
        Verdict.MISSED,
    )
    assert answer.detail == (
        "missed: no run was recorded for it; the trigger named calendar holidays, deleted "
        "since (calendars keep no history): if it held that date, nothing was due"
    )


async def test_a_run_removed_by_the_history_limit_is_not_said_to_be_missing(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    # Six minutely occurrences ran; the task keeps its newest three finished runs.
    await service.create_task(task_spec(**MINUTELY, history_limit=3))
    for minute in range(6):
        [claimed] = await memory_store.claim_due(T0 + minute * MINUTE, 10, REPLICA)
        await finish_one(memory_store, claimed.run.id, succeeded(T0 + minute * MINUTE))
    assert await memory_store.delete_runs_over_limit(100) == 3
    clock.set(T0 + 10 * MINUTE)

    kept = await service.explain("minutely", T0 + 4 * MINUTE)
    removed = await service.explain("minutely", T0 + 1 * MINUTE)

    assert kept.verdict is Verdict.RAN
    assert (removed.occurrence, removed.verdict, removed.runs) == (
        T0 + 1 * MINUTE,
        Verdict.MISSED,
        [],
    )
    assert removed.detail == (
        "missed: no run is kept for it; the task keeps only its newest 3 finished runs "
        "(history_limit) and none from before it is left: if a run was made for it, it "
        "was removed since"
    )


async def test_a_missed_occurrence_with_older_runs_kept_is_said_to_have_none(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    # The limit has removed nothing: the run before the occurrence is still there.
    await service.create_task(task_spec(**MINUTELY, history_limit=3))
    [claimed] = await memory_store.claim_due(T0, 10, REPLICA)
    await finish_one(memory_store, claimed.run.id, succeeded(T0))
    clock.set(T0 + 10 * MINUTE)

    answer = await service.explain("minutely", T0 + 1 * MINUTE)

    assert (answer.verdict, answer.detail) == (
        Verdict.MISSED,
        "missed: no run was recorded for it",
    )
