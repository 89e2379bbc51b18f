"""What became of an occurrence (`explain`): the verdict and its sentence, from the task's
history and runs, driven through SchedulingService on the in-memory store and a fake clock."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore
from application.scheduling import SchedulingService
from domain.errors import TaskNotFound
from domain.explain import Verdict
from domain.runs import RunOutcome, RunStatus
from tests.application.test_scheduling import T0
from tests.application.test_scheduling import clock as clock  # fixtures
from tests.application.test_scheduling import service as service
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import task_spec

SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)
REPLICA = "test:1"


# The task every test here explains: a minutely interval anchored at T0.
MINUTELY = {
    "name": "minutely",
    "trigger": {"kind": "interval", "every": 60, "anchor": T0.isoformat()},
    "target": {"url": "http://127.0.0.1:9/run", "timeout_seconds": 100},
}


def succeeded(at: datetime) -> RunOutcome:
    return RunOutcome(status=RunStatus.SUCCEEDED, attempts=1, http_status=200, finished_at=at)


async def test_a_run_that_succeeded_ran(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    await service.create_task(task_spec(**MINUTELY))
    [claimed] = await memory_store.claim_due(T0, 10, REPLICA)
    await finish_one(memory_store, claimed.run.id, succeeded(T0 + SECOND))
    clock.set(T0 + 30 * SECOND)

    answer = await service.explain("minutely", T0 + 30 * SECOND)

    assert (answer.occurrence, answer.verdict, answer.task_version) == (T0, Verdict.RAN, 1)
    assert [run.id for run in answer.runs] == [claimed.run.id]
    assert answer.detail == f"ran: run {claimed.run.id} succeeded after 1 attempt"


async def test_a_late_claim_is_missed_and_says_by_how_much(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    await service.create_task(task_spec(**MINUTELY, misfire_grace_seconds=10))
    await memory_store.claim_due(T0 + 30 * SECOND, 10, REPLICA)
    clock.set(T0 + 40 * SECOND)

    answer = await service.explain("minutely", T0 + 5 * SECOND)

    assert answer.verdict is Verdict.MISSED
    assert answer.detail == "missed: claimed 30 s after 2026-03-07T12:00:00Z, past the 10 s grace"


async def test_a_folded_occurrence_is_coalesced_into_the_later_run(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    await service.create_task(task_spec(**MINUTELY, misfire_grace_seconds=None))
    [claimed] = await memory_store.claim_due(T0 + 2 * MINUTE, 10, REPLICA)
    assert claimed.run.coalesced == 3
    clock.set(T0 + 3 * MINUTE)

    answer = await service.explain("minutely", T0 + 30 * SECOND)

    assert (answer.occurrence, answer.verdict) == (T0, Verdict.COALESCED)
    assert [run.id for run in answer.runs] == [claimed.run.id]
    assert str(claimed.run.id) in answer.detail and "2 other occurrences" in answer.detail


async def test_a_skipped_occurrence_names_the_run_that_held_the_slot(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    await service.create_task(task_spec(**MINUTELY))
    [held] = await memory_store.claim_due(T0, 10, REPLICA)
    [skipped] = await memory_store.claim_due(T0 + MINUTE, 10, REPLICA)
    assert skipped.run.status is RunStatus.SKIPPED
    clock.set(T0 + 70 * SECOND)

    answer = await service.explain("minutely", T0 + 61 * SECOND)

    assert (answer.occurrence, answer.verdict) == (T0 + MINUTE, Verdict.SKIPPED)
    assert answer.detail == (
        f"skipped: run {held.run.id} held the only slot (max_running_instances = 1)"
    )


async def test_a_skip_names_the_run_of_the_same_claim_whose_call_started_a_second_later(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    """A backlog caught up whole (`catch_up: all`) in one claim: its first occurrence takes
    the slot and the next are skipped. The holder's start, written with its outcome, is
    its call's, a second after the claim; it held the slot all the same (an audit saw
    "runs of this task held the only slot", no run named)."""
    spec = task_spec(**MINUTELY, catch_up="all", max_catch_up=2, misfire_grace_seconds=None)
    await service.create_task(spec)
    claim_at = T0 + 3 * MINUTE + SECOND
    held, skipped = [c.run for c in await memory_store.claim_due(claim_at, 10, REPLICA)][-2:]
    assert (held.status, skipped.status) == (RunStatus.RUNNING, RunStatus.SKIPPED)
    outcome = succeeded(claim_at + 5 * SECOND).model_copy(update={"started_at": claim_at + SECOND})
    await finish_one(memory_store, held.id, outcome)
    clock.set(T0 + 4 * MINUTE)

    answer = await service.explain("minutely", skipped.scheduled_for)

    assert answer.verdict is Verdict.SKIPPED
    assert answer.detail == (
        f"skipped: run {held.id} held the only slot (max_running_instances = 1)"
    )


async def test_a_skip_under_buffer_one_names_the_run_that_already_waited(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    await service.create_task(task_spec(**MINUTELY, overlap="buffer_one"))
    [held] = await memory_store.claim_due(T0, 10, REPLICA)
    [waiting] = await memory_store.claim_due(T0 + MINUTE, 10, REPLICA)
    [skipped] = await memory_store.claim_due(T0 + 2 * MINUTE, 10, REPLICA)
    assert skipped.run.status is RunStatus.SKIPPED
    clock.set(T0 + 130 * SECOND)

    answer = await service.explain("minutely", T0 + 121 * SECOND)

    assert (answer.occurrence, answer.verdict) == (T0 + 2 * MINUTE, Verdict.SKIPPED)
    assert answer.detail == (
        f"skipped: run {held.run.id} held the only slot (max_running_instances = 1), "
        f"and run {waiting.run.id} already waited for one (overlap buffer_one)"
    )


async def test_an_occurrence_waiting_for_a_slot_is_queued(
    service: SchedulingService, memory_store: InMemoryTaskStore, clock: FakeClock
) -> None:
    await service.create_task(task_spec(**MINUTELY, overlap="buffer_one"))
    [held] = await memory_store.claim_due(T0, 10, REPLICA)
    [waiting] = await memory_store.claim_due(T0 + MINUTE, 10, REPLICA)
    assert waiting.run.status is RunStatus.QUEUED
    clock.set(T0 + 70 * SECOND)

    answer = await service.explain("minutely", T0 + 61 * SECOND)

    assert (answer.occurrence, answer.verdict) == (T0 + MINUTE, Verdict.QUEUED)
    assert [run.id for run in answer.runs] == [waiting.run.id]
    assert answer.detail == f"queued: run {waiting.run.id} waits for a slot"
    assert held.run.status is RunStatus.RUNNING


async def test_a_paused_task_was_not_scheduled_and_says_who_paused_it(
    service: SchedulingService, clock: FakeClock
) -> None:
    await service.create_task(task_spec(**MINUTELY), actor="deploy")
    clock.set(T0 + 10 * SECOND)
    await service.pause_task("minutely", actor="ops")
    clock.set(T0 + 200 * SECOND)
    await service.resume_task("minutely", actor="ops")

    answer = await service.explain("minutely", T0 + 70 * SECOND)

    assert (answer.occurrence, answer.verdict, answer.task_version) == (
        T0 + MINUTE,
        Verdict.NOT_SCHEDULED,
        2,
    )
    assert answer.detail == (
        "not scheduled: the task was paused from 2026-03-07T12:00:10Z "
        "to 2026-03-07T12:03:20Z by token ops"
    )


async def test_before_the_task_existed_and_for_an_unknown_task(
    service: SchedulingService,
) -> None:
    await service.create_task(task_spec(**MINUTELY))

    answer = await service.explain("minutely", T0 - MINUTE)

    assert (answer.verdict, answer.occurrence, answer.task_version) == (
        Verdict.NOT_SCHEDULED,
        None,
        None,
    )
    assert answer.detail == "not scheduled: the task did not exist at 2026-03-07T11:59:00Z"
    with pytest.raises(TaskNotFound):
        await service.explain("nobody", T0)


async def test_an_occurrence_before_the_task_asked_about_after_it_names_the_version_then(
    service: SchedulingService, clock: FakeClock
) -> None:
    # Hourly, made at 12:00:30: asked at 12:00:40, the occurrence is 12:00:00, before the
    # task; the version in force at the instant asked about is version 1.
    hourly = {"name": "hourly", "trigger": {"kind": "cron", "expression": "0 * * * *"}}
    clock.set(T0 + 30 * SECOND)
    await service.create_task(task_spec(**hourly))

    answer = await service.explain("hourly", T0 + 40 * SECOND)

    assert (answer.verdict, answer.occurrence, answer.task_version) == (
        Verdict.NOT_SCHEDULED,
        T0,
        1,
    )
    assert answer.detail == "not scheduled: the task did not exist at 2026-03-07T12:00:00Z"
