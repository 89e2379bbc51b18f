"""The TaskStore contract of tasks: create, read, list, update and delete, on every store."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID, uuid4

import pytest

from application.ports import TaskFilter, TaskPageKey, TaskStore
from domain.errors import (
    DuplicateTaskName,
    ScheduleMoved,
    TaskNotFound,
    VersionConflict,
)
from domain.runs import RunStatus
from tests.adapters.contract_support import (
    MINUTE,
    MINUTELY,
    REPLICA,
    SECOND,
    T0,
    claim_one,
    succeeded,
)
from tests.adapters.contract_support import store as store  # the fixture
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import make_task, new_task, task_spec


async def test_create_get_and_get_by_name(store: TaskStore) -> None:
    task = make_task(MINUTELY, tags=["a", "b"], description="hello")
    created = await store.create_task(task)
    assert created == task.model_copy(update={"version": 1})
    assert await store.get_task(task.id) == created
    assert await store.get_task_by_name(task.name) == created


# Tasks as clients write them, touching every kind of trigger and every optional part of
# a target: what a store answers to a create is what it reads back.
_SPECS = {
    "cron in a zone, with a DST policy": {
        "trigger": {
            "kind": "cron",
            "expression": "30 2 * * *",
            "timezone": "America/New_York",
            "dst": {"gap": "skip", "fold": "both"},
        },
    },
    "interval with bounds": {
        "trigger": {
            "kind": "interval",
            "every": 90,
            "start_at": "2026-03-01T00:00:00Z",
            "end_at": "2027-03-01T00:00:00Z",
        },
    },
    "calendar interval on a start date": {
        "trigger": {
            "kind": "calendar",
            "months": 1,
            "hour": 9,
            "start_date": "2026-01-31",
            "timezone": "Europe/Paris",
        },
    },
    "one-shot at a wall time": {
        "trigger": {"kind": "one_shot", "run_at": "2026-03-03T09:00:00", "timezone": "Asia/Tokyo"},
    },
    "every optional part": {
        "description": "all of it",
        "tags": ["a", "b"],
        "enabled": False,
        "misfire_grace_seconds": None,
        "max_running_instances": 3,
        "jitter_seconds": 5,
        "pause_after_failures": 4,
        "catch_up": "all",
        "max_catch_up": 7,
        "overlap": "buffer_all",
        "history_limit": 50,
        "notify": {
            "url": "http://127.0.0.1:9/events",
            "events": ["run.failed"],
            "headers_env": {"X-Key": "EVENT_KEY"},
        },
        "target": {
            "url": "http://127.0.0.1:9/run?x=1",
            "method": "PUT",
            "headers": {"X-Team": "ops"},
            "headers_env": {"X-Api-Key": "API_KEY"},
            "body": {"nested": [1, 2.5, None, {"deep": True}], "text": "é\u2603"},
            "timeout_seconds": 2.5,
            "auth": {"type": "basic", "username": "u", "password_env": "PASSWORD"},
            "retry": {"max_attempts": 3, "backoff_seconds": 0.5, "max_backoff_seconds": 4},
            "template": True,
        },
    },
}


@pytest.mark.parametrize("spec", _SPECS.values(), ids=list(_SPECS))
async def test_a_task_created_from_a_spec_reads_back_as_answered(
    store: TaskStore, spec: dict[str, object]
) -> None:
    task = new_task(task_spec(name=f"task-{uuid4().hex[:10]}", **spec), T0)
    created = await store.create_task(task)
    assert created.version == 1
    assert await store.get_task(task.id) == created
    assert await store.get_task_by_name(task.name) == created


async def test_unknown_tasks_are_not_found(store: TaskStore) -> None:
    with pytest.raises(TaskNotFound):
        await store.get_task(uuid4())
    with pytest.raises(TaskNotFound):
        await store.get_task_by_name("nobody")
    with pytest.raises(TaskNotFound):
        await store.delete_task(uuid4())
    with pytest.raises(TaskNotFound):
        await store.update_task(make_task(), 1, reschedule=False)
    with pytest.raises(TaskNotFound):
        await store.start_manual_run(uuid4(), T0, REPLICA)


async def test_duplicate_name_is_rejected(store: TaskStore) -> None:
    await store.create_task(make_task(name="twice"))
    with pytest.raises(DuplicateTaskName):
        await store.create_task(make_task(name="twice"))


async def test_list_filters(store: TaskStore) -> None:
    red = await store.create_task(make_task(name="red-1", tags=["red"]))
    blue = await store.create_task(make_task(name="blue-1", tags=["blue"], enabled=False))
    both = await store.create_task(make_task(name="red-2", tags=["red", "blue"]))

    async def names(task_filter: TaskFilter) -> set[str]:
        return {t.name for t in await store.list_tasks(task_filter, None, 100)}

    assert await names(TaskFilter()) == {red.name, blue.name, both.name}
    assert await names(TaskFilter(enabled=True)) == {red.name, both.name}
    assert await names(TaskFilter(enabled=False)) == {blue.name}
    assert await names(TaskFilter(tag="blue")) == {blue.name, both.name}
    assert await names(TaskFilter(name_prefix="red-")) == {red.name, both.name}
    assert await names(TaskFilter(enabled=True, tag="blue", name_prefix="red")) == {both.name}
    assert await names(TaskFilter(tag="green")) == set()


async def test_list_pages_return_every_task_exactly_once(store: TaskStore) -> None:
    # Groups of tasks share a created_at, so the id breaks ties.
    expected: list[tuple[datetime, UUID]] = []
    for i in range(23):
        task = await store.create_task(make_task(now=T0 + (i // 4) * SECOND))
        expected.append((task.created_at, task.id))
    expected.sort()
    seen: list[tuple[datetime, UUID]] = []
    after = None
    while True:
        page = await store.list_tasks(TaskFilter(), after, 5)
        seen.extend((t.created_at, t.id) for t in page)
        if len(page) < 5:
            break
        after = TaskPageKey(page[-1].created_at, page[-1].id)
    assert seen == expected


async def test_update_checks_the_version(store: TaskStore) -> None:
    task = await store.create_task(make_task())
    later = T0 + MINUTE
    changed = task.model_copy(update={"description": "new", "updated_at": later})
    updated = await store.update_task(changed, 1, reschedule=False)
    assert (updated.description, updated.version, updated.updated_at) == ("new", 2, later)
    assert updated.created_at == task.created_at
    with pytest.raises(VersionConflict) as conflict:
        await store.update_task(changed, 1, reschedule=False)
    assert conflict.value.actual == 2
    assert await store.get_task(task.id) == updated


async def test_update_to_a_taken_name_is_rejected(store: TaskStore) -> None:
    await store.create_task(make_task(name="first"))
    second = await store.create_task(make_task(name="second"))
    with pytest.raises(DuplicateTaskName):
        await store.update_task(second.model_copy(update={"name": "first"}), 1, reschedule=False)
    renamed = await store.update_task(
        second.model_copy(update={"name": "third"}), 1, reschedule=False
    )
    assert (await store.get_task_by_name("third")).id == renamed.id
    with pytest.raises(TaskNotFound):
        await store.get_task_by_name("second")


async def test_update_keeps_the_schedule_unless_told_to_reschedule(store: TaskStore) -> None:
    read = await store.create_task(make_task())  # due at T0
    await claim_one(store, T0)  # a claim advances the schedule meanwhile
    stale = read.model_copy(update={"description": "x", "consecutive_failures": 5})
    kept = await store.update_task(stale, 1, reschedule=False)
    assert (kept.next_fire_at, kept.next_run_at) == (T0 + MINUTE, T0 + MINUTE)
    assert kept.consecutive_failures == 0
    moved = kept.model_copy(
        update={"next_fire_at": T0 + 5 * MINUTE, "next_run_at": T0 + 5 * MINUTE}
    )
    rescheduled = await store.update_task(moved, 2, reschedule=True)
    assert rescheduled.next_run_at == T0 + 5 * MINUTE
    assert await store.claim_due(T0 + 4 * MINUTE, 10, REPLICA) == []
    assert (await claim_one(store, T0 + 5 * MINUTE)).scheduled_for == T0 + 5 * MINUTE


async def test_a_new_schedule_planned_from_a_read_a_claim_moved_is_not_written(
    store: TaskStore,
) -> None:
    # A plan made before a claim, written after it, would claim that occurrence again:
    # the write refuses (nothing written), and one planned from a fresh read lands.
    read = await store.create_task(make_task())  # due at T0, every minute
    await claim_one(store, T0)
    planned = read.model_copy(update={"next_fire_at": T0, "next_run_at": T0, "description": "x"})
    with pytest.raises(ScheduleMoved):
        await store.update_task(planned, 1, reschedule=True, read=read)
    stored = await store.get_task(read.id)
    assert (stored.version, stored.description, stored.next_fire_at) == (1, None, T0 + MINUTE)
    assert await store.claim_due(T0 + SECOND, 10, REPLICA) == []  # T0 not claimed twice
    # Not rescheduling, the write keeps the stored schedule and lands.
    assert (await store.update_task(planned, 1, reschedule=False, read=read)).version == 2
    fresh = await store.get_task(read.id)
    later = fresh.model_copy(
        update={"next_fire_at": T0 + 2 * MINUTE, "next_run_at": T0 + 2 * MINUTE}
    )
    written = await store.update_task(later, 2, reschedule=True, read=fresh)
    assert (written.version, written.next_fire_at) == (3, T0 + 2 * MINUTE)


async def test_delete_keeps_the_runs_readable(store: TaskStore) -> None:
    task = await store.create_task(make_task())
    run = await claim_one(store, T0)
    await store.delete_task(task.id)
    with pytest.raises(TaskNotFound):
        await store.get_task(task.id)
    assert await store.get_run(run.id) == run
    assert await store.list_runs(task.id, None, None, 10) == [run]
    assert await store.claim_due(T0 + MINUTE, 10, REPLICA) == []
    finished = await finish_one(store, run.id, succeeded())
    assert finished.status is RunStatus.SUCCEEDED


async def test_delete_at_an_expected_version_checks_it_as_it_deletes(store: TaskStore) -> None:
    task = await store.create_task(make_task())
    await store.update_task(task.model_copy(update={"description": "v2"}), 1, reschedule=False)

    # The task is at version 2: a delete expecting 1 deletes nothing, records nothing.
    with pytest.raises(VersionConflict) as stale:
        await store.delete_task(task.id, at=T0, expected_version=1)
    assert (stale.value.expected, stale.value.actual) == (1, 2)
    assert (await store.get_task(task.id)).version == 2
    assert [v.version for v in await store.task_history(task.id, None, 10)] == [2, 1]
    with pytest.raises(TaskNotFound):
        await store.delete_task(uuid4(), expected_version=1)

    await store.delete_task(task.id, at=T0, expected_version=2)
    with pytest.raises(TaskNotFound):
        await store.get_task(task.id)
    assert [v.version for v in await store.task_history(task.id, None, 10)] == [3, 2, 1]
