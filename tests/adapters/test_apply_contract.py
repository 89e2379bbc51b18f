"""The TaskStore contract of `apply_tasks`: creates, updates and deletes in one
transaction, all or nothing, each with its history version. Every store passes it."""

from __future__ import annotations

import pytest

from application.ports import TaskDelete, TaskFilter, TaskStore, TaskUpdate
from domain.errors import DuplicateTaskName, TaskNotFound, VersionConflict
from tests.adapters.contract_support import MINUTE, T0
from tests.fixtures.backends import Backend
from tests.fixtures.tasks import make_task


@pytest.fixture
async def store(backend: Backend) -> TaskStore:
    return await backend.new_store()


async def names(store: TaskStore) -> set[str]:
    return {task.name for task in await store.list_tasks(TaskFilter(), None, 100)}


async def test_apply_writes_everything_with_its_versions(store: TaskStore) -> None:
    changing = await store.create_task(make_task(name="changing"))
    doomed = await store.create_task(make_task(name="doomed"))
    later = T0 + MINUTE
    update = TaskUpdate(
        changing.model_copy(update={"description": "new", "updated_at": later}), 1, False
    )
    await store.apply_tasks(
        [make_task(name="fresh")],
        [update],
        [TaskDelete(doomed.id, doomed.version)],
        at=later,
        actor="deploy",
    )
    assert await names(store) == {"changing", "fresh"}
    assert (await store.get_task(changing.id)).description == "new"
    versions = await store.task_history(changing.id, None, 10)
    newest = versions[0]
    assert (newest.version, newest.actor, dict(newest.changes)) == (
        2,
        "deploy",
        {"description": (None, "new")},
    )
    fresh = await store.get_task_by_name("fresh")
    assert [(v.version, v.actor) for v in await store.task_history(fresh.id, None, 10)] == [
        (1, "deploy")
    ]
    gone = await store.task_history(doomed.id, None, 10)
    assert (gone[0].version, gone[0].at, gone[0].state) == (2, later, None)


async def test_apply_is_all_or_nothing(store: TaskStore) -> None:
    kept = await store.create_task(make_task(name="kept"))
    other = await store.create_task(make_task(name="other"))
    stale = TaskUpdate(kept.model_copy(update={"description": "x"}), 7, False)
    with pytest.raises(VersionConflict):
        await store.apply_tasks([make_task(name="a")], [stale], [TaskDelete(other.id, 1)], at=T0)
    with pytest.raises(DuplicateTaskName):
        await store.apply_tasks(
            [make_task(name="b"), make_task(name="kept")], [], [TaskDelete(other.id, 1)], at=T0
        )
    with pytest.raises(TaskNotFound):
        await store.apply_tasks([make_task(name="c")], [], [TaskDelete(make_task().id, 1)], at=T0)
    # A delete at a version the task has left (a change made after the caller read
    # it, which may have taken it out of a prune's selector): refused, nothing written.
    with pytest.raises(VersionConflict):
        await store.apply_tasks([make_task(name="d")], [], [TaskDelete(other.id, 2)], at=T0)
    assert await names(store) == {"kept", "other"}
    assert [v.version for v in await store.task_history(kept.id, None, 10)] == [1]
    assert [v.version for v in await store.task_history(other.id, None, 10)] == [1]


async def test_apply_of_many_tasks(store: TaskStore) -> None:
    tasks = [make_task(name=f"bulk-{i}") for i in range(300)]
    await store.apply_tasks(tasks, [], [], at=T0)
    assert len(await store.list_tasks(TaskFilter(name_prefix="bulk-"), None, 500)) == 300
