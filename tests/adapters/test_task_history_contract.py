"""The TaskStore contract of task history: every change of a task is a version, written
in the transaction of the change, kept after the task is deleted and swept by retention.
Every store passes it."""

from __future__ import annotations

from uuid import uuid4

import pytest
from pydantic import JsonValue

from application.ports import TaskStore
from domain.errors import VersionConflict
from domain.history import ChangeCause, TaskVersion
from domain.tasks import TaskSpec
from domain.triggers import CronTrigger
from tests.adapters.contract_support import MINUTE, REPLICA, SECOND, T0, failed
from tests.fixtures.backends import Backend
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import make_task


@pytest.fixture
async def store(backend: Backend) -> TaskStore:
    return await backend.new_store()


def summary(
    versions: list[TaskVersion],
) -> list[tuple[int, str | None, str, dict[str, tuple[JsonValue, JsonValue]]]]:
    return [(v.version, v.actor, v.cause.value, dict(v.changes)) for v in versions]


async def test_create_update_and_delete_are_versions_with_their_actor(store: TaskStore) -> None:
    task = await store.create_task(make_task(name="hist", tags=["a"]), actor="deploy")
    first = (await store.task_history(task.id, None, 10))[0]
    assert (first.version, first.actor, first.cause, first.at) == (
        1,
        "deploy",
        ChangeCause.API,
        T0,
    )
    # Version 1: every writable field, from null; the state is the task's writable fields.
    assert set(first.changes) == set(TaskSpec.model_fields)
    assert first.changes["name"] == (None, "hist")
    assert first.changes["tags"] == (None, ["a"])
    assert first.state == task.spec().model_dump(mode="json")

    later = T0 + MINUTE
    renamed = task.model_copy(
        update={
            "description": "new",
            "tags": ["a", "b"],
            "trigger": CronTrigger(expression="5 * * * *"),
            "updated_at": later,
        }
    )
    await store.update_task(renamed, 1, reschedule=False, actor="ops")
    paused = await store.update_task(
        renamed.model_copy(update={"enabled": False, "updated_at": later + MINUTE}),
        2,
        reschedule=True,
    )
    await store.delete_task(task.id, at=later + 2 * MINUTE, actor="ops")

    versions = await store.task_history(task.id, None, 10)
    assert summary(versions) == [
        (4, "ops", "api", {"deleted": (False, True)}),
        (3, None, "api", {"enabled": (True, False)}),
        (
            2,
            "ops",
            "api",
            {
                "description": (None, "new"),
                "tags": (["a"], ["a", "b"]),
                "trigger": (
                    task.trigger.model_dump(mode="json"),
                    {
                        "kind": "cron",
                        "expression": "5 * * * *",
                        "timezone": "UTC",
                        "start_at": None,
                        "end_at": None,
                    },
                ),
            },
        ),
        (1, "deploy", "api", versions[-1].changes),
    ]
    assert [v.at for v in versions] == [later + 2 * MINUTE, later + MINUTE, later, T0]
    assert versions[0].state is None
    assert versions[1].state == paused.spec().model_dump(mode="json")
    # Paging by version, and the version in force at an instant.
    assert [v.version for v in await store.task_history(task.id, 3, 1)] == [2]
    assert (await store.task_version_at(task.id, T0 - SECOND)) is None
    at_later = await store.task_version_at(task.id, later + 30 * SECOND)
    assert at_later is not None and at_later.version == 2
    assert at_later.state is not None
    trigger = at_later.state["trigger"]
    assert isinstance(trigger, dict) and trigger["expression"] == "5 * * * *"
    gone = await store.task_version_at(task.id, later + 3 * MINUTE)
    assert gone is not None and gone.state is None
    assert await store.task_history(uuid4(), None, 10) == []


async def test_a_stale_update_records_no_version(store: TaskStore) -> None:
    task = await store.create_task(make_task())
    await store.update_task(task.model_copy(update={"description": "x"}), 1, reschedule=False)
    with pytest.raises(VersionConflict):
        await store.update_task(task.model_copy(update={"description": "y"}), 1, reschedule=False)
    assert [v.version for v in await store.task_history(task.id, None, 10)] == [2, 1]


async def test_an_auto_pause_is_a_version_without_actor(store: TaskStore) -> None:
    task = await store.create_task(make_task(pause_after_failures=1))
    claimed = await store.claim_due(T0, 10, REPLICA)
    await finish_one(store, claimed[0].run.id, failed(T0))
    versions = await store.task_history(task.id, None, 10)
    assert summary(versions)[0] == (2, None, "auto_pause", {"enabled": (True, False)})
    assert versions[0].at == T0 + SECOND
    assert versions[0].state is not None and versions[0].state["enabled"] is False
    assert (await store.get_task(task.id)).version == 2


async def test_retention_keeps_what_was_in_force_at_the_cutoff(store: TaskStore) -> None:
    kept = await store.create_task(make_task())
    for minute in (1, 2):
        current = await store.get_task(kept.id)
        changed = current.model_copy(
            update={"description": f"v{minute}", "updated_at": T0 + minute * MINUTE}
        )
        await store.update_task(changed, current.version, reschedule=False)
    gone = await store.create_task(make_task())
    await store.delete_task(gone.id, at=T0 + MINUTE)
    cutoff = T0 + 90 * SECOND

    # Of the kept task only version 1 goes: version 2 was in force at the cutoff and
    # version 3 came after it. The deleted task's versions (made, then deleted) all go.
    assert await store.delete_history_before(cutoff, 1) == 1
    assert await store.delete_history_before(cutoff, 10) == 2
    assert await store.delete_history_before(cutoff, 10) == 0
    assert [v.version for v in await store.task_history(kept.id, None, 10)] == [3, 2]
    assert await store.task_history(gone.id, None, 10) == []
