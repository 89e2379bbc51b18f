"""Recording outcomes in batches (`finish_runs`): its round trips, concurrent batches on
the same tasks, and the task rows it leaves alone. The semantics are the contract's."""

from __future__ import annotations

import asyncio
from uuid import uuid4

import pytest

from adapters.postgres import PostgresTaskStore
from domain.runs import Run, RunOutcome, RunStatus
from domain.triggers import IntervalTrigger
from tests.adapters.postgres.support import SECOND, T0, one_connection, query
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import make_task

pytestmark = pytest.mark.postgres

EVERY_SECOND = IntervalTrigger(every=1, anchor=T0)


def ended(status: RunStatus) -> RunOutcome:
    return RunOutcome(status=status, attempts=1, finished_at=T0 + SECOND)


async def claim_seconds(store: PostgresTaskStore, seconds: int) -> list[Run]:
    runs = []
    for i in range(seconds):
        runs += [c.run for c in await store.claim_due(T0 + i * SECOND, 1000, "r")]
    return runs


@pytest.mark.parametrize("batch", [1, 50])
async def test_a_finish_batch_costs_two_round_trips(
    postgres_backend: PostgresBackend, batch: int
) -> None:
    async with one_connection(postgres_backend) as one:
        store = one.store
        for _ in range(batch):
            await store.create_task(
                make_task(EVERY_SECOND, max_running_instances=10, pause_after_failures=7)
            )
        runs = await claim_seconds(store, 7)
        chunks = [runs[i : i + batch] for i in range(0, len(runs), batch)]
        for chunk in chunks[:6]:  # past psycopg's prepare threshold as well
            await store.finish_runs([(run.id, ended(RunStatus.FAILED)) for run in chunk])
        # The seventh failure pauses every task; one run was no longer running.
        outcomes = [(run.id, ended(RunStatus.FAILED)) for run in chunks[6]]
        outcomes += [(uuid4(), ended(RunStatus.SUCCEEDED)), (runs[0].id, ended(RunStatus.FAILED))]
        recorded, trips = await one.round_trips(lambda: store.finish_runs(outcomes))
    assert [r.id for r in recorded] == [run.id for run in chunks[6]] + [runs[0].id]
    assert trips == 2
    [(paused,)] = await query(
        postgres_backend.url,
        "SELECT count(*) FROM {schema}.tasks WHERE NOT enabled AND version = 2",
        postgres_backend.schema,
    )
    assert paused == batch


async def test_concurrent_batches_count_every_failure(postgres_backend: PostgresBackend) -> None:
    first, second = [await postgres_backend.new_store() for _ in range(2)]
    tasks = [
        await first.create_task(make_task(EVERY_SECOND, max_running_instances=40)) for _ in range(4)
    ]
    runs = await claim_seconds(first, 30)
    by_task = {task.id: [r for r in runs if r.task_id == task.id] for task in tasks}
    # Each batch holds runs of every task, the two in opposite task orders.
    forward = [r for task in tasks for r in by_task[task.id][:15]]
    backward = [r for task in reversed(tasks) for r in by_task[task.id][15:]]
    for part in range(3):
        await asyncio.gather(
            *(
                store.finish_runs(
                    [(r.id, ended(RunStatus.FAILED)) for r in mine[part * 20 : part * 20 + 20]]
                )
                for store, mine in ((first, forward), (second, backward))
            )
        )
    for task in tasks:
        assert (await first.get_task(task.id)).consecutive_failures == 30
    leases = await query(
        postgres_backend.url, "SELECT count(*) FROM {schema}.run_leases", postgres_backend.schema
    )
    assert leases == [(0,)]


async def test_successes_leave_a_task_without_failures_unwritten(
    postgres_backend: PostgresBackend,
) -> None:
    store = await postgres_backend.new_store()
    calm = await store.create_task(make_task())
    shaky = await store.create_task(make_task())
    first = {c.task.id: c.run for c in await store.claim_due(T0, 10, "r")}
    await finish_one(store, first[shaky.id].id, ended(RunStatus.FAILED))
    statement = "SELECT id, xmin::text FROM {schema}.tasks"
    before = dict(await query(postgres_backend.url, statement, postgres_backend.schema))
    runs = {c.task.id: c.run for c in await store.claim_due(T0 + 60 * SECOND, 10, "r")}
    claimed = dict(await query(postgres_backend.url, statement, postgres_backend.schema))
    assert claimed != before  # the claim advanced both
    await store.finish_runs([(run.id, ended(RunStatus.SUCCEEDED)) for run in runs.values()])
    after = dict(await query(postgres_backend.url, statement, postgres_backend.schema))
    assert after[calm.id] == claimed[calm.id]  # nothing to count: not even locked
    assert after[shaky.id] != claimed[shaky.id]  # its failure count was reset
    assert (await store.get_task(shaky.id)).consecutive_failures == 0
