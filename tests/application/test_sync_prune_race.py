"""`POST /tasks/apply` with `prune` against a change made while it decides (docs/api.md,
"POST /tasks/apply"), on every store: a task changed after the apply read it is never
deleted unseen. An outside audit PATCHed tasks out of a prune's selector on one replica
while an apply pruned by that selector on another: the PATCHes answered 200, then the
apply deleted the tasks they had just changed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from application.ports import TaskDelete, TaskStore, TaskUpdate
from application.scheduling import SchedulingService
from application.sync import TaskSync
from domain.errors import TaskNotFound
from domain.tasks import Task, TaskSpec
from tests.application.sync_support import sync_over
from tests.fixtures.backends import Backend


class ChangedMeanwhile:
    """A store whose first `apply_tasks` is preceded by another client's change: what
    the apply decided was read before that change."""

    def __init__(self, store: TaskStore) -> None:
        self.inner = store
        self.change: Any = None  # the other client's write, made once
        self.applies = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

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

    # The apply read again and decided again: the keeper is no longer in its selector.
    assert (result.created, sorted(result.deleted)) == (["listed"], ["stale"])
    assert store.applies == 2
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
