"""`POST /tasks/apply` against writers that never stop (docs/api.md, "POST /tasks/apply"),
on every store: after a few attempts lost to them, the apply holds the tasks it may
touch while it decides, and lands; the writers wait for it and land after it. Before,
an apply that another client kept changing a task of lost each of its 50 attempts and
answered 503."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest

from application.ports import HoldScope, TaskDelete, TaskHold, TaskStore, TaskUpdate
from application.scheduling import SchedulingService
from application.sync import UNHELD_ATTEMPTS, TaskSync
from domain.errors import TransactionCollided
from domain.tasks import Task, TaskSpec
from tests.application.sync_support import sync_over
from tests.fixtures.backends import Backend


class Relentless:
    """A store another client writes to all the time: a change of one task lands
    between every apply's read and its write, and one starts during every hold."""

    def __init__(self, store: TaskStore) -> None:
        self.inner = store
        self.change: Callable[[], Coroutine[Any, Any, Any]] | None = None
        self.applies = 0
        self.holds = 0
        self.during_holds: list[asyncio.Task[Any]] = []

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
        assert self.change is not None
        await self.change()
        await self.inner.apply_tasks(created, updated, deleted, **kwargs)

    @asynccontextmanager
    async def hold_tasks(self, scope: HoldScope) -> AsyncIterator[TaskHold]:
        self.holds += 1
        assert self.change is not None
        async with self.inner.hold_tasks(scope) as hold:
            writing = asyncio.create_task(self.change())
            self.during_holds.append(writing)
            # Bounded: a write that does not wait for the hold lands within milliseconds.
            done, _ = await asyncio.wait({writing}, timeout=0.3)
            assert not done, "another client's write went through while the apply held"
            yield hold


@pytest.fixture
async def sync(backend: Backend) -> AsyncIterator[tuple[TaskSync, SchedulingService, Relentless]]:
    store = Relentless(await backend.new_store())
    tasks, service = await sync_over(store, backend)
    yield tasks, service, store


def spec(name: str, url: str = "https://reports.test/hook", *tags: str) -> TaskSpec:
    return TaskSpec.model_validate(
        {
            "name": name,
            "trigger": {"kind": "interval", "every": 3600},
            "target": {"url": url},
            "tags": list(tags),
        }
    )


async def test_an_apply_that_others_keep_changing_lands_and_their_writes_land_after_it(
    sync: tuple[TaskSync, SchedulingService, Relentless],
) -> None:
    tasks, service, store = sync
    await service.create_task(spec("busy", "https://reports.test/old", "nightly"))
    writes = 0

    async def another_client() -> None:  # a PATCH without If-Match, again and again
        nonlocal writes
        writes += 1
        await service.update_task("busy", {"description": f"write {writes}"}, actor="ops")

    store.change = another_client
    # Without prune: a prune holds its scope from its first attempt (test_sync_prune_race).
    result = await tasks.apply(
        [spec("busy", "https://reports.test/new", "nightly"), spec("fresh")], actor="deploy"
    )

    assert (result.created, result.updated, result.deleted) == (["fresh"], ["busy"], [])
    # Lost each unheld attempt, then held the tasks once and landed.
    assert (store.applies, store.holds) == (UNHELD_ATTEMPTS, 1)
    await asyncio.gather(*store.during_holds)  # the write that waited on the hold
    busy = await service.get_task("busy")
    assert (busy.target.url, busy.description) == ("https://reports.test/new", f"write {writes}")
    history = await service.task_history("busy", 10)
    # The apply's version (the whole definition: the description it does not list is
    # cleared), and the waiting write's on top of it: neither lost.
    assert [(v.actor, sorted(v.changes)) for v in history.items[:2]] == [
        ("ops", ["description"]),
        ("deploy", ["description", "target"]),
    ]


class Colliding:
    """A store whose first batch write the database rolls back for meeting another
    transaction (a deadlock it broke)."""

    def __init__(self, store: TaskStore) -> None:
        self.inner = store
        self.applies = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def apply_tasks(self, *args: Any, **kwargs: Any) -> None:
        self.applies += 1
        if self.applies == 1:
            raise TransactionCollided("the transaction collided with another")
        await self.inner.apply_tasks(*args, **kwargs)


async def test_an_apply_the_database_rolled_back_for_a_collision_decides_again(
    backend: Backend,
) -> None:
    store = Colliding(await backend.new_store())
    tasks, service = await sync_over(store, backend)

    result = await tasks.apply([spec("fresh")])

    assert (result.created, store.applies) == (["fresh"], 2)
    assert (await service.get_task("fresh")).version == 1
