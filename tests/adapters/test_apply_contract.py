"""The TaskStore contract of `apply_tasks`: creates, updates and deletes in one
transaction, all or nothing, each with its history version; and of `hold_tasks`, in
whose transaction such a batch is decided and written while other writers of its tasks
wait. Every store passes it."""

from __future__ import annotations

import asyncio

import pytest

from application.ports import (
    HoldScope,
    TaskDelete,
    TaskFilter,
    TaskKept,
    TaskStore,
    TaskUpdate,
)
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


async def test_apply_writes_nothing_when_a_task_it_keeps_changed_or_went(
    store: TaskStore,
) -> None:
    # What an apply answered "unchanged" must still be so when its writes land: a prune
    # that deleted it meanwhile, or a change to it, makes the whole batch refused.
    gone = await store.create_task(make_task(name="gone"))
    changed = await store.create_task(make_task(name="changed"))
    await store.delete_task(gone.id, at=T0)
    renamed = changed.model_copy(update={"description": "meanwhile", "updated_at": T0})
    await store.update_task(renamed, 1, reschedule=False)

    with pytest.raises(TaskNotFound):
        await store.apply_tasks([make_task(name="a")], [], [], at=T0, kept=[TaskKept(gone.id, 1)])
    with pytest.raises(VersionConflict):
        await store.apply_tasks(
            [make_task(name="b")], [], [], at=T0, kept=[TaskKept(changed.id, 1)]
        )
    assert await names(store) == {"changed"}

    await store.apply_tasks([make_task(name="c")], [], [], at=T0, kept=[TaskKept(changed.id, 2)])
    assert await names(store) == {"changed", "c"}


async def test_apply_of_many_tasks(store: TaskStore) -> None:
    tasks = [make_task(name=f"bulk-{i}") for i in range(300)]
    await store.apply_tasks(tasks, [], [], at=T0)
    assert len(await store.list_tasks(TaskFilter(name_prefix="bulk-"), None, 500)) == 300


async def test_the_tasks_a_scope_covers_are_read_without_the_rest(store: TaskStore) -> None:
    # What an unheld apply decides from: its listed names and, pruning, its selector's
    # tasks, in one read (however many other tasks are stored), in id order.
    listed = await store.create_task(make_task(name="listed"))
    selected = await store.create_task(make_task(name="selected", tags=["nightly"]))
    await store.create_task(make_task(name="elsewhere", tags=["hourly"]))

    named = await store.tasks_covered(HoldScope(frozenset({"listed", "fresh"})))
    pruning = HoldScope(frozenset({"listed"}), prune=True, tag="nightly")
    everything = await store.tasks_covered(HoldScope(frozenset(), prune=True))

    assert named == [listed]
    assert await store.tasks_covered(pruning) == sorted([listed, selected], key=lambda t: t.id)
    assert sorted(t.name for t in everything) == ["elsewhere", "listed", "selected"]
    assert [t.id for t in everything] == sorted(t.id for t in everything)


async def test_a_hold_reads_the_tasks_of_its_scope_and_writes_as_apply_does(
    store: TaskStore,
) -> None:
    listed = await store.create_task(make_task(name="listed"))
    selected = await store.create_task(make_task(name="selected", tags=["nightly"]))
    await store.create_task(make_task(name="elsewhere", tags=["hourly"]))

    named = HoldScope(frozenset({"listed", "fresh"}))
    async with store.hold_tasks(named) as hold:
        assert [task.name for task in hold.tasks] == ["listed"]
    pruning = HoldScope(frozenset({"listed", "fresh"}), prune=True, tag="nightly")
    async with store.hold_tasks(pruning) as hold:
        assert sorted(task.name for task in hold.tasks) == ["listed", "selected"]
        assert {t.id: t.version for t in hold.tasks} == {listed.id: 1, selected.id: 1}
        changed = listed.model_copy(update={"description": "held", "updated_at": T0 + MINUTE})
        await hold.apply_tasks(
            [make_task(name="fresh")],
            [TaskUpdate(changed, 1, False)],
            [TaskDelete(selected.id, 1)],
            at=T0 + MINUTE,
            actor="deploy",
        )
    everything = HoldScope(frozenset(), prune=True)
    async with store.hold_tasks(everything) as hold:
        assert sorted(task.name for task in hold.tasks) == ["elsewhere", "fresh", "listed"]
    stored = await store.get_task(listed.id)
    assert (stored.description, stored.version) == ("held", 2)
    assert (await store.task_history(listed.id, None, 1))[0].actor == "deploy"


async def test_a_write_to_a_held_task_waits_for_the_hold_and_then_sees_its_version(
    store: TaskStore,
) -> None:
    task = await store.create_task(make_task(name="busy"))
    other = store  # another client of the same database: a write of the same task
    async with store.hold_tasks(HoldScope(frozenset({"busy"}))) as hold:
        write = asyncio.create_task(
            other.update_task(
                task.model_copy(update={"description": "meanwhile"}), 1, reschedule=False
            )
        )
        # Bounded: a write that does not wait for the hold ends within milliseconds.
        done, _ = await asyncio.wait({write}, timeout=0.5)
        assert not done, "a write to a held task went through while it was held"
        held = task.model_copy(update={"description": "held", "updated_at": T0 + MINUTE})
        await hold.apply_tasks([], [TaskUpdate(held, 1, False)], [], at=T0 + MINUTE)
    with pytest.raises(VersionConflict):
        await write
    stored = await store.get_task(task.id)
    assert (stored.description, stored.version) == ("held", 2)


async def test_a_hold_left_by_an_exception_writes_nothing_and_lets_go(store: TaskStore) -> None:
    task = await store.create_task(make_task(name="kept"))
    with pytest.raises(RuntimeError):
        async with store.hold_tasks(HoldScope(frozenset({"kept"}))) as hold:
            changed = task.model_copy(update={"description": "lost"})
            await hold.apply_tasks(
                [make_task(name="lost")], [TaskUpdate(changed, 1, False)], [], at=T0
            )
            raise RuntimeError("the caller failed after its writes")
    assert await names(store) == {"kept"}
    assert (await store.get_task(task.id)).description is None
    # Nothing is held any more: a write goes through at once.
    changed = task.model_copy(update={"description": "after"})
    assert (await store.update_task(changed, 1, reschedule=False)).version == 2


async def test_an_update_planned_from_a_read_a_claim_moved_writes_nothing(
    store: TaskStore,
) -> None:
    read = await store.create_task(make_task(name="claimed"))  # due at T0, every minute
    [claimed] = await store.claim_due(T0, 10, "r1")
    assert claimed.run.scheduled_for == T0
    planned = read.model_copy(update={"next_fire_at": T0, "next_run_at": T0, "description": "x"})
    with pytest.raises(VersionConflict):
        await store.apply_tasks(
            [make_task(name="beside")], [TaskUpdate(planned, 1, True, read=read)], [], at=T0
        )
    assert await names(store) == {"claimed"}  # all or nothing
    stored = await store.get_task(read.id)
    assert (stored.version, stored.next_fire_at) == (1, T0 + MINUTE)
