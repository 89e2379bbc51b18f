"""`POST /tasks/apply` with `prune` against a change made while it decides (docs/api.md,
"POST /tasks/apply"), on every store: a task changed after the apply read it is never
deleted unseen. An outside audit PATCHed tasks out of a prune's selector on one replica
while an apply pruned by that selector on another: the PATCHes answered 200, then the
apply deleted the tasks they had just changed. Another ran two prunes of one selector at
once, each listing one task: both answered 200, and neither task was left."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest

from application.ports import HoldScope, TaskDelete, TaskFilter, TaskHold, TaskStore, TaskUpdate
from application.scheduling import SchedulingService
from application.sync import TaskSync
from domain.errors import TaskNotFound
from domain.tasks import Task, TaskSpec
from tests.application.sync_support import sync_over
from tests.fixtures.backends import Backend


class ChangedMeanwhile:
    """A store whose first write of an apply (`apply_tasks`, or the start of a
    `hold_tasks`) is preceded by another client's change: an unheld apply decided from a
    read made before that change; a held one waits for it, then reads."""

    def __init__(self, store: TaskStore) -> None:
        self.inner = store
        self.change: Any = None  # the other client's write, made once
        self.applies = 0
        self.holds = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @asynccontextmanager
    async def hold_tasks(self, scope: HoldScope) -> AsyncIterator[TaskHold]:
        self.holds += 1
        if self.change is not None:
            change, self.change = self.change, None
            await change()
        async with self.inner.hold_tasks(scope) as hold:
            yield hold

    async def apply_tasks(
        self,
        created: Sequence[Task],
        updated: Sequence[TaskUpdate],
        deleted: Sequence[TaskDelete],
        **kwargs: Any,
    ) -> None:
        self.applies += 1
        if self.change is not None:
            change, self.change = self.change, None
            await change()
        await self.inner.apply_tasks(created, updated, deleted, **kwargs)


@pytest.fixture
async def sync(backend: Backend) -> AsyncIterator[tuple[TaskSync, SchedulingService, Any]]:
    store = ChangedMeanwhile(await backend.new_store())
    tasks, service = await sync_over(store, backend)
    yield tasks, service, store


def spec(name: str, *tags: str) -> TaskSpec:
    return TaskSpec.model_validate(
        {
            "name": name,
            "trigger": {"kind": "interval", "every": 3600},
            "target": {"url": "https://reports.test/hook"},
            "tags": list(tags),
        }
    )


async def test_a_task_changed_out_of_the_selector_meanwhile_is_not_pruned(
    sync: tuple[TaskSync, SchedulingService, Any],
) -> None:
    tasks, service, store = sync
    for name in ("keeper", "stale"):
        await service.create_task(spec(name, "nightly"))

    async def moved_out() -> None:  # another client, after the apply read the tasks
        await service.update_task("keeper", {"tags": ["kept"]}, actor="ops")

    store.change = moved_out
    result = await tasks.apply([spec("listed", "nightly")], prune=True, selector_tag="nightly")

    # A prune holds its scope, and reads it then: the keeper is no longer in it.
    assert (result.created, sorted(result.deleted)) == (["listed"], ["stale"])
    assert (store.applies, store.holds) == (0, 1)
    keeper = await service.get_task("keeper")
    assert (keeper.tags, keeper.version) == (["kept"], 2)
    with pytest.raises(TaskNotFound):
        await service.get_task("stale")


async def test_a_task_changed_but_still_selected_is_pruned_at_its_new_version(
    sync: tuple[TaskSync, SchedulingService, Any],
) -> None:
    tasks, service, store = sync
    await service.create_task(spec("doomed", "nightly"))

    async def described() -> None:
        await service.update_task("doomed", {"description": "changed meanwhile"})

    store.change = described
    result = await tasks.apply([], prune=True, selector_tag="nightly")

    assert result.deleted == ["doomed"]
    with pytest.raises(TaskNotFound):
        await service.get_task("doomed")


async def test_an_apply_that_kept_a_task_a_prune_deleted_meanwhile_creates_it_again(
    sync: tuple[TaskSync, SchedulingService, Any], backend: Backend
) -> None:
    """A deploy of one file (no prune) lists `report`, stored as listed, and a new task
    of the `nightly` selector; another replica's prune of that selector, listing neither,
    lands between its read and its write. The deploy must not answer `report` unchanged
    beside its new task: no order of the two leaves `fresh` without `report`."""
    tasks, service, store = sync
    await service.create_task(spec("report", "nightly"))
    other, _ = await sync_over(store.inner, backend)  # another replica, on the same store

    async def pruned() -> None:
        assert (await other.apply([], prune=True, selector_tag="nightly")).deleted == ["report"]

    store.change = pruned
    result = await tasks.apply([spec("report", "nightly"), spec("fresh", "nightly")])

    # It found the prune's delete when it wrote, and decided again after it.
    assert (sorted(result.created), result.unchanged) == (["fresh", "report"], [])
    listed = await service.list_tasks(TaskFilter(tag="nightly"), 10)
    assert sorted(task.name for task in listed.items) == ["fresh", "report"]


class BothDecided:
    """A store whose unheld writes wait until two applies have each decided: what two
    prunes at once do when each decides from what it read before the other wrote."""

    def __init__(self, store: TaskStore, decided: asyncio.Barrier) -> None:
        self.inner = store
        self.decided = decided

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def apply_tasks(self, *writes: Any, **kwargs: Any) -> None:
        async with asyncio.timeout(10):
            await self.decided.wait()
        await self.inner.apply_tasks(*writes, **kwargs)


async def test_two_prunes_of_one_selector_at_once_leave_one_file(backend: Backend) -> None:
    """Two replicas' applies at once, each listing one task of the selector: the tasks
    left are those of one file (the later one's), never neither."""
    decided = asyncio.Barrier(2)
    first = BothDecided(await backend.new_store(), decided)
    second = BothDecided(await backend.new_store(), decided)
    (one, service), (other, _) = await sync_over(first, backend), await sync_over(second, backend)
    for name in ("a", "b"):
        await service.create_task(spec(name, "g"))

    results = await asyncio.gather(
        one.apply([spec("a", "g")], prune=True, selector_tag="g"),
        other.apply([spec("b", "g")], prune=True, selector_tag="g"),
    )

    left = sorted(task.name for task in (await service.list_tasks(TaskFilter(tag="g"), 10)).items)
    assert left in (["a"], ["b"])
    # The one that went first deleted the other's task; the later one created it again.
    assert sorted(r.deleted[0] for r in results) == ["a", "b"]
