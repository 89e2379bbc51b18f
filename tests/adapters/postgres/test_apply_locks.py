"""An apply's locks on PostgreSQL (docs/storage.md, "Lock order", "An apply's hold"):
the cycles and the stale read an outside audit found once applies could hold their
tasks. Every writer of tasks and their runs takes the task rows first, in id order; a
hold reads its tasks only after it has them; two applies creating the same names insert
them in one order. Each test makes the two transactions meet; before, each ended in a
deadlock that PostgreSQL broke after a second (a 503), or in a read that missed a task."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from uuid import UUID

import psycopg
import pytest

from adapters.postgres import PostgresTaskStore
from application.ports import HoldScope, TaskDelete, TaskStore, TaskUpdate
from domain.errors import DuplicateTaskName, TaskNotFound
from domain.runs import RunStatus
from domain.tasks import Task
from domain.triggers import IntervalTrigger
from tests.adapters.postgres.support import T0, waiting
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually

pytestmark = pytest.mark.postgres

STEP = timedelta(seconds=10)


async def test_a_delete_of_a_task_with_queued_runs_waits_for_a_hold_that_prunes_it(
    postgres_backend: PostgresBackend,
) -> None:
    store, other = await postgres_backend.new_store(), await postgres_backend.new_store()
    trigger = IntervalTrigger(every=10, anchor=T0)
    task = await store.create_task(
        make_task(trigger, overlap="buffer_all", misfire_grace_seconds=None, tags=["nightly"])
    )
    await store.claim_due(T0, 10, "r:1")
    [queued] = await store.claim_due(T0 + STEP, 10, "r:1")
    assert queued.run.status is RunStatus.QUEUED

    async with store.hold_tasks(HoldScope(frozenset(), prune=True, tag="nightly")) as hold:
        deleting = asyncio.create_task(other.delete_task(task.id))
        await eventually(lambda: waiting(postgres_backend), "the delete to wait")
        await hold.apply_tasks([], [], [TaskDelete(task.id, task.version)], at=T0 + STEP)

    with pytest.raises(TaskNotFound):  # it waited, then found the task gone
        await deleting
    assert (await store.get_run(queued.run.id)).status is RunStatus.CANCELLED


async def test_a_hold_reads_a_task_committed_while_it_waited_for_its_locks(
    postgres_backend: PostgresBackend,
) -> None:
    store = await postgres_backend.new_store()
    await store.create_task(make_task(name="listed", tags=["nightly"]))
    url, schema = postgres_backend.url, postgres_backend.schema
    async with await psycopg.AsyncConnection.connect(url) as writer:
        # Another writer (an apply that does not hold) changes "listed" and creates a
        # task under the selector, and has not committed yet.
        await writer.execute(
            f'UPDATE "{schema}".tasks SET description = %s WHERE name = %s', ["by A", "listed"]
        )
        await writer.execute(
            f'INSERT INTO "{schema}".tasks SELECT (jsonb_populate_record(NULL::"{schema}".tasks,'
            " to_jsonb(t) || jsonb_build_object('id', gen_random_uuid(), 'name', 'created')"
            f')).* FROM "{schema}".tasks AS t WHERE name = %s',
            ["listed"],
        )

        async def hold_and_read() -> list[Task]:
            async with store.hold_tasks(HoldScope(frozenset({"listed"}), True, "nightly")) as h:
                return h.tasks

        holding = asyncio.create_task(hold_and_read())
        await eventually(lambda: waiting(postgres_backend), "the hold to wait")
        await writer.commit()
        held = await holding

    assert sorted((t.name, t.description) for t in held) == [
        ("created", "by A"),
        ("listed", "by A"),
    ]


async def concurrently(*writes: Callable[[], Awaitable[None]]) -> list[BaseException | None]:
    """Run the writes at once; what each raised (None: it landed)."""
    results = await asyncio.gather(*(write() for write in writes), return_exceptions=True)
    return [r if isinstance(r, BaseException) else None for r in results]


async def test_an_apply_and_a_hold_updating_the_same_tasks_never_deadlock(
    postgres_backend: PostgresBackend,
) -> None:
    """A hold locks its tasks in id order (as the outcome counts do); the batch UPDATE
    of an apply that does not hold locked them in the order of its join, which is not
    the ids' (random UUIDs, here rows written in another order). A third transaction
    holding the first row stops the UPDATE there and the hold after the rows before it
    in id order; once it lets go, the UPDATE went on to those rows: a cycle."""
    first, second = await postgres_backend.new_store(), await postgres_backend.new_store()
    # The first row of the table has the greatest id: held, it stops the UPDATE before
    # any row and the hold after every other.
    last = await first.create_task(make_task(name="t000", id=UUID(int=2**128 - 1)))
    tasks = [last] + [await first.create_task(make_task(name=f"t{i:03d}")) for i in range(1, 120)]
    scope = HoldScope(frozenset(task.name for task in tasks))
    updates = [
        TaskUpdate(t.model_copy(update={"description": "apply"}), t.version, False) for t in tasks
    ]

    async def held() -> None:
        async with second.hold_tasks(scope) as hold:
            writes = [
                TaskUpdate(t.model_copy(update={"description": "hold"}), t.version, False)
                for t in hold.tasks
            ]
            await hold.apply_tasks([], writes, [], at=T0)

    url, schema = postgres_backend.url, postgres_backend.schema
    async with await psycopg.AsyncConnection.connect(url) as third:
        await third.execute(
            f'SELECT 1 FROM "{schema}".tasks WHERE id = %s FOR NO KEY UPDATE', [last.id]
        )
        unheld = asyncio.create_task(first.apply_tasks([], updates, [], at=T0))
        await eventually(lambda: waiting(postgres_backend, 1), "the apply to wait")
        holding = asyncio.create_task(held())
        await eventually(lambda: waiting(postgres_backend, 2), "the hold to wait too")
        await third.rollback()
        raised = await concurrently(lambda: unheld, lambda: holding)

    # The apply went first (it waited first); the hold then read its versions.
    assert raised == [None, None]
    assert {(await first.get_task(t.id)).description for t in tasks} == {"hold"}


async def test_two_applies_creating_the_same_names_in_opposite_orders_never_deadlock(
    postgres_backend: PostgresBackend,
) -> None:
    first, second = await postgres_backend.new_store(), await postgres_backend.new_store()
    for round_ in range(5):
        names = [f"new-{round_}-{i:03d}" for i in range(200)]

        def creating(store: TaskStore, order: list[str]) -> Callable[[], Awaitable[None]]:
            return lambda: store.apply_tasks([make_task(name=n) for n in order], [], [], at=T0)

        raised = await concurrently(creating(first, names), creating(second, names[::-1]))
        assert sorted(type(r).__name__ for r in raised if r is not None) == [
            DuplicateTaskName.__name__
        ], raised


async def test_holds_waiting_for_each_other_leave_the_pool_to_the_rest(
    postgres_backend: PostgresBackend,
) -> None:
    """Holds run one at a time; those waiting their turn keep no connection: an audit's
    30 applies queued on the hold's lock took every connection of the replica's pool,
    and its reads, its engine and its event sender answered 503."""
    store = PostgresTaskStore(await postgres_backend.new_pool(max_size=2), postgres_backend.schema)
    task = await store.create_task(make_task(name="read-meanwhile"))
    inside, release = asyncio.Event(), asyncio.Event()

    async def hold(first: bool) -> None:
        async with store.hold_tasks(HoldScope(frozenset({"read-meanwhile"}))):
            if first:
                inside.set()
                await release.wait()

    holding = [asyncio.create_task(hold(first=i == 0)) for i in range(6)]
    try:
        await inside.wait()
        await asyncio.sleep(0.2)  # for the holds behind it to take what they would take
        # One connection is the first hold's; the other is free for a read.
        assert (await asyncio.wait_for(store.get_task(task.id), 3)).id == task.id
    finally:
        release.set()
        await asyncio.gather(*holding, return_exceptions=True)
