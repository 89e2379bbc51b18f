"""Use cases, driven through `SchedulingService` on the in-memory store and a fake clock.

Assertions read the end state back from the store, as a client would see it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from adapters.clock import FakeClock
from adapters.http import HttpExecutor
from adapters.memory import InMemoryTaskStore
from application.engine import TriggerLoop
from application.engine_settings import EngineSettings
from application.ports import TaskFilter
from application.scheduling import SchedulingService
from domain.errors import (
    DuplicateTaskName,
    InvalidRequest,
    RunNotRunning,
    TaskNotFound,
    VersionConflict,
)
from domain.runs import RunStatus
from domain.triggers import CalendarTrigger, IntervalTrigger
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.tasks import task_spec

T0 = datetime(2026, 3, 7, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
async def service(
    clock: FakeClock, memory_store: InMemoryTaskStore
) -> AsyncIterator[SchedulingService]:
    executor = HttpExecutor()
    engine = TriggerLoop(
        memory_store, memory_store.new_waker(), executor, clock, EngineSettings(replica="test:1")
    )
    yield SchedulingService(memory_store, executor, clock, engine, replica="test:1")
    await engine.stop()
    await executor.close()


async def test_create_fills_defaults_and_schedules_the_first_fire_time(
    service: SchedulingService,
) -> None:
    task = await service.create_task(task_spec())
    assert task.version == 1 and task.enabled
    assert task.target.method == "POST" and task.misfire_grace_seconds == 60
    # 02:30 New York (EST, -5) on 2026-03-08 does not exist (spring forward): it is read
    # with the offset before the gap, 07:30 UTC.
    assert task.next_run_at == datetime(2026, 3, 8, 7, 30, tzinfo=UTC)
    assert await service.get_task("nightly") == task
    assert await service.get_task(str(task.id)) == task


async def test_interval_without_start_is_anchored_at_creation_and_due_at_once(
    service: SchedulingService,
) -> None:
    task = await service.create_task(task_spec(trigger={"kind": "interval", "every": "PT15M"}))
    assert isinstance(task.trigger, IntervalTrigger)
    assert task.trigger.anchor == T0
    assert task.next_run_at == T0


@pytest.mark.parametrize(
    "trigger",
    [
        {"kind": "interval", "every": "PT15M"},
        {"kind": "calendar", "months": 1, "hour": 9, "timezone": "Pacific/Auckland"},
    ],
)
async def test_a_patch_sending_the_same_trigger_again_keeps_the_schedule(
    service: SchedulingService, clock: FakeClock, trigger: dict[str, Any]
) -> None:
    # What the scheduler filled in (the anchor, the start date) is not in the patch; it
    # is still the same trigger, so the task is not re-anchored nor due again at once.
    task = await service.create_task(task_spec(trigger=trigger))
    clock.advance(timedelta(minutes=1))

    patched = await service.update_task(task.id, {"trigger": trigger})

    assert patched.trigger == task.trigger
    assert patched.next_run_at == task.next_run_at


async def test_calendar_without_start_date_starts_today_in_its_zone(
    service: SchedulingService,
) -> None:
    trigger = {"kind": "calendar", "months": 1, "hour": 9, "timezone": "Pacific/Auckland"}
    task = await service.create_task(task_spec(trigger=trigger))
    assert isinstance(task.trigger, CalendarTrigger)
    assert task.trigger.start_date == date(2026, 3, 8)  # already the 8th in Auckland


async def test_duplicate_name_is_rejected(service: SchedulingService) -> None:
    await service.create_task(task_spec())
    with pytest.raises(DuplicateTaskName):
        await service.create_task(task_spec())


async def test_one_shot_past_its_grace_is_rejected_and_nothing_is_written(
    service: SchedulingService,
) -> None:
    old = {"kind": "one_shot", "run_at": "2026-03-07T11:58:00Z"}
    with pytest.raises(InvalidRequest) as caught:
        await service.create_task(task_spec(trigger=old))
    assert caught.value.field == "trigger.run_at"
    assert (await service.list_tasks(TaskFilter())).items == []


async def test_one_shot_within_grace_is_due_at_once(service: SchedulingService) -> None:
    recent = {"kind": "one_shot", "run_at": "2026-03-07T11:59:30Z"}
    task = await service.create_task(task_spec(trigger=recent))
    assert task.next_run_at == datetime(2026, 3, 7, 11, 59, 30, tzinfo=UTC)


async def test_merge_patch_replaces_trigger_whole_and_merges_target(
    service: SchedulingService, clock: FakeClock
) -> None:
    task = await service.create_task(
        task_spec(target={"url": "http://127.0.0.1:9/", "headers": {"A": "1"}})
    )
    clock.advance(10)
    patched = await service.update_task(
        "nightly",
        {"trigger": {"kind": "interval", "every": 60}, "target": {"headers": {"B": "2"}}},
        if_match=task.version,
    )
    assert patched.version == 2
    assert patched.target.headers == {"A": "1", "B": "2"}
    assert patched.target.url == "http://127.0.0.1:9/"
    assert isinstance(patched.trigger, IntervalTrigger)
    assert patched.trigger.timezone == "UTC"  # not merged from the old cron trigger
    assert patched.next_run_at == T0 + timedelta(seconds=10)  # a new trigger fires at once
    assert patched.updated_at == T0 + timedelta(seconds=10)


async def test_patch_null_removes_an_optional_field(service: SchedulingService) -> None:
    await service.create_task(task_spec(description="nightly report"))
    patched = await service.update_task("nightly", {"description": None})
    assert patched.description is None


async def test_stale_if_match_is_a_conflict_and_writes_nothing(
    service: SchedulingService,
) -> None:
    task = await service.create_task(task_spec())
    await service.update_task("nightly", {"tags": ["a"]})
    with pytest.raises(VersionConflict):
        await service.update_task("nightly", {"tags": ["b"]}, if_match=task.version)
    assert (await service.get_task("nightly")).tags == ["a"]


async def test_invalid_patch_names_the_field_and_writes_nothing(
    service: SchedulingService,
) -> None:
    await service.create_task(task_spec())
    with pytest.raises(InvalidRequest) as caught:
        await service.update_task(
            "nightly", {"trigger": {"kind": "cron", "expression": "61 * * * *"}}
        )
    assert caught.value.field == "trigger.expression"
    with pytest.raises(InvalidRequest) as caught:
        await service.update_task("nightly", {"target": {"retyr": {}}})
    assert (caught.value.field, caught.value.message) == ("target.retyr", "unknown field")
    assert (await service.get_task("nightly")).version == 1


async def test_pause_clears_next_run_and_resume_reschedules_and_resets_failures(
    service: SchedulingService, clock: FakeClock
) -> None:
    await service.create_task(task_spec(trigger={"kind": "interval", "every": 3600}))
    paused = await service.pause_task("nightly")
    assert (paused.enabled, paused.next_run_at) == (False, None)
    assert (await service.pause_task("nightly")).version == paused.version  # idempotent
    clock.advance(timedelta(minutes=90))
    resumed = await service.resume_task("nightly")
    # Anchored at creation (12:00): the first occurrence at or after 13:30 is 14:00.
    assert resumed.enabled and resumed.next_run_at == T0 + timedelta(hours=2)
    assert resumed.consecutive_failures == 0


async def test_delete_keeps_runs_readable(
    service: SchedulingService, recording_target: RecordingTarget
) -> None:
    await service.create_task(task_spec(target={"url": recording_target.url("/hook")}))
    run = await service.fire_now("nightly")
    await service.delete_task("nightly")
    with pytest.raises(TaskNotFound):
        await service.get_task("nightly")
    assert (await service.get_run(run.id)).id == run.id


async def test_fire_now_calls_the_target_with_a_manual_key(
    service: SchedulingService, recording_target: RecordingTarget
) -> None:
    task = await service.create_task(task_spec(target={"url": recording_target.url("/hook")}))
    run = await service.fire_now("nightly")
    assert run.manual and run.status is RunStatus.RUNNING and run.scheduled_for == T0
    finished = await wait_for_status(service, run.id, RunStatus.SUCCEEDED)
    assert finished.http_status == 200
    (request,) = recording_target.received("/hook")
    assert request.header("Idempotency-Key") == f"{task.id}:{run.id}"


async def test_fire_now_at_the_instance_limit_is_skipped(
    service: SchedulingService, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/slow", Response(delay=5))
    await service.create_task(task_spec(target={"url": recording_target.url("/slow")}))
    first = await service.fire_now("nightly")
    second = await service.fire_now("nightly")
    assert first.status is RunStatus.RUNNING
    assert second.status is RunStatus.SKIPPED


async def test_fire_now_on_a_replica_with_every_call_slot_taken_is_skipped(
    clock: FakeClock, memory_store: InMemoryTaskStore, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/slow", Response(delay=5))
    executor = HttpExecutor()
    settings = EngineSettings(replica="test:1", max_concurrent_runs=1)
    engine = TriggerLoop(memory_store, memory_store.new_waker(), executor, clock, settings)
    service = SchedulingService(memory_store, executor, clock, engine, replica="test:1")
    try:
        await service.create_task(task_spec(target={"url": recording_target.url("/slow")}))
        other = task_spec(name="other", target={"url": recording_target.url("/other")})
        await service.create_task(other)
        assert (await service.fire_now("nightly")).status is RunStatus.RUNNING
        await asyncio.sleep(0)  # the call takes the process's one slot
        skipped = await service.fire_now("other")
        assert skipped.status is RunStatus.SKIPPED
        assert "max_concurrent_runs = 1" in (skipped.error or "")
        assert (await service.get_run(skipped.id)).error == skipped.error
    finally:
        recording_target.release()
        await engine.stop()
        await executor.close()
    assert recording_target.received("/other") == []


async def test_cancel_stops_a_running_run_and_a_finished_one_cannot_be_cancelled(
    service: SchedulingService, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/slow", Response(delay=5))
    await service.create_task(task_spec(target={"url": recording_target.url("/slow")}))
    run = await service.fire_now("nightly")
    requested = await service.cancel_run(run.id)
    assert requested.status is RunStatus.RUNNING
    with pytest.raises(RunNotRunning):
        await service.cancel_run((await service.fire_now("nightly")).id)  # skipped run


async def test_dry_run_renders_without_sending_and_redacts_secrets(
    service: SchedulingService, recording_target: RecordingTarget
) -> None:
    target = {
        "url": recording_target.url("/hook"),
        "auth": {"type": "bearer", "token_env": "SOME_TOKEN"},
        "body": {"x": 1},
    }
    await service.create_task(task_spec(target=target))
    rendered = await service.dry_run("nightly")
    assert rendered.method == "POST" and rendered.url == recording_target.url("/hook")
    assert rendered.headers["Authorization"] == "Bearer ***"
    assert rendered.body == {"x": 1}
    assert recording_target.received() == []


async def test_list_pages_return_every_task_once_and_carry_filters(
    service: SchedulingService, clock: FakeClock
) -> None:
    for k in range(7):
        clock.advance(1)
        await service.create_task(task_spec(name=f"task-{k}", tags=["even"] if k % 2 == 0 else []))
    seen, cursor = [], None
    while True:
        page = await service.list_tasks(TaskFilter(tag="even"), limit=2, cursor=cursor)
        seen += [t.name for t in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == ["task-0", "task-2", "task-4", "task-6"]
    with pytest.raises(InvalidRequest):
        await service.list_tasks(TaskFilter(), limit=501)
    with pytest.raises(InvalidRequest):
        await service.list_tasks(TaskFilter(), cursor="not-a-cursor")


async def test_upcoming_and_preview(service: SchedulingService) -> None:
    await service.create_task(task_spec())
    upcoming = await service.upcoming("nightly", 3)
    assert upcoming == [
        datetime(2026, 3, 8, 7, 30, tzinfo=UTC),  # in the gap: 03:30 EDT
        datetime(2026, 3, 9, 6, 30, tzinfo=UTC),  # 02:30 EDT
        datetime(2026, 3, 10, 6, 30, tzinfo=UTC),
    ]
    assert service.preview({"kind": "interval", "every": 60}, 2) == [T0, T0 + timedelta(minutes=1)]
    after = datetime(2026, 3, 7, 12, 0, 30, tzinfo=UTC)
    assert service.preview({"kind": "cron", "expression": "* * * * *"}, 1, after) == [
        datetime(2026, 3, 7, 12, 1, tzinfo=UTC)
    ]
    with pytest.raises(InvalidRequest) as caught:
        service.preview({"kind": "cron", "expression": "* * * * *", "timezone": "Mars/Base"}, 1)
    assert caught.value.field == "trigger.timezone"
    with pytest.raises(InvalidRequest):
        service.preview({"kind": "interval", "every": 60}, 101)


async def wait_for_status(service: SchedulingService, run_id: Any, status: RunStatus) -> Any:
    async with asyncio.timeout(10):
        while (run := await service.get_run(run_id)).status is not status:
            await asyncio.sleep(0.01)
    return run


NIGHTLY = {"kind": "cron", "expression": "30 2 * * *", "timezone": "America/New_York"}


async def test_upcoming_lists_what_will_not_fire_before_the_next_fire_time(
    service: SchedulingService,
) -> None:
    # 07:00 in New York on 2026-03-07; 02:30 does not exist on the 8th.
    trigger = {**NIGHTLY, "dst": {"gap": "skip"}}
    await service.create_task(task_spec(trigger=trigger))

    _, listed = await service.upcoming_annotated("nightly", 2)

    assert [o.at for o in listed.occurrences] == [
        datetime(2026, 3, 9, 6, 30, tzinfo=UTC),
        datetime(2026, 3, 10, 6, 30, tzinfo=UTC),
    ]
    # Before the first fire time, yet what a person reading "what comes next" must see.
    assert [(o.date.isoformat(), o.reason) for o in listed.omitted] == [("2026-03-08", "dst_gap")]
