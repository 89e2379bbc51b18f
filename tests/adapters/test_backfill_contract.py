"""The store contract for backfills (docs/policies.md, "Backfill"), on every store:
runs for past occurrences, each with its backfill's id, placed in the task's slots as
claims are, `only_missing`, `dry_run`, and a backfill's cancel."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

import pytest

from application.backfills import BackfillStore
from application.ports import RunFilter, TaskStore
from domain.backfills import CANCELLED_BY_BACKFILL, STOPPED_BY_BACKFILL, Backfill
from domain.errors import BackfillNotFound, TaskNotFound
from domain.runs import RunStatus, idempotency_key, occurrence_key
from domain.tasks import Task
from tests.adapters.contract_support import REPLICA, SECOND, T0, succeeded
from tests.adapters.contract_support import failed as failed_at
from tests.adapters.contract_support import store as store  # the fixture
from tests.adapters.test_overlap_contract import STEP, add, claim_at, runs_of
from tests.fixtures.runs import finish_one

NOW = T0 + 100 * STEP
PAST = [T0 + step * STEP for step in range(5)]


def backfills(store: TaskStore) -> BackfillStore:
    found: BackfillStore = store.backfills  # type: ignore[attr-defined]
    return found


async def backfill(
    store: TaskStore,
    task: Task,
    occurrences: list[datetime] = PAST,
    *,
    overlap: Any = "buffer_all",
    only_missing: bool = True,
    dry_run: bool = False,
) -> Backfill:
    return await backfills(store).backfill(
        task.id, uuid4(), occurrences, overlap, only_missing, NOW, REPLICA, dry_run
    )


def statuses(made: Backfill) -> list[RunStatus]:
    return [claimed.run.status for claimed in made.made]


async def test_buffer_all_starts_what_the_slots_allow_and_queues_the_rest(
    store: TaskStore,
) -> None:
    task = await add(store, "buffer_all")
    made = await backfill(store, task)
    assert statuses(made) == [RunStatus.RUNNING] + [RunStatus.QUEUED] * 4
    assert made.occurrences == PAST
    assert [c.run.id for c in made.to_call()] == [made.made[0].run.id]
    stored = await runs_of(store, task)
    assert [r.scheduled_for for r in stored] == PAST
    assert {r.backfill_id for r in stored} == {made.backfill_id}
    assert not any(r.manual for r in stored)
    # Each run's call carries its original occurrence's Idempotency-Key.
    assert [idempotency_key(r) for r in stored] == [occurrence_key(task.id, at) for at in PAST]
    listed = await store.list_all_runs(RunFilter(backfill_id=made.backfill_id), None, 10)
    assert len(listed) == 5

    # The queue starts them one by one, in order, as for claimed occurrences.
    running = made.made[0].run
    order = []
    for step in range(1, 5):
        at = NOW + step * SECOND
        freed = await store.finish_runs_starting([(running.id, succeeded(at))], at, REPLICA)
        running = freed.started[0].run
        order.append(running.scheduled_for)
    assert order == PAST[1:]


async def test_backfilled_runs_wait_behind_a_run_in_flight(store: TaskStore) -> None:
    task = await add(store, "buffer_all")
    await claim_at(store, 99)  # its latest run holds the only slot at NOW
    made = await backfill(store, task, PAST[1:3], only_missing=False)
    assert statuses(made) == [RunStatus.QUEUED, RunStatus.QUEUED]
    assert made.to_call() == []


async def test_allow_all_starts_every_one_beside_the_others(store: TaskStore) -> None:
    task = await add(store, "skip")
    await claim_at(store, 99)
    made = await backfill(store, task, overlap="allow_all", only_missing=False)
    assert statuses(made) == [RunStatus.RUNNING] * 5
    assert len(made.to_call()) == 5


async def test_only_missing_leaves_out_occurrences_that_succeeded(store: TaskStore) -> None:
    task = await add(store, "buffer_all", max_running_instances=10)
    done = (await claim_at(store, 0))[0].run
    await finish_one(store, done.id, succeeded(T0 + SECOND))
    failed = (await claim_at(store, 1))[0].run
    await finish_one(store, failed.id, failed_at(T0 + STEP))
    made = await backfill(store, task, PAST[:3])
    assert made.occurrences == PAST[1:3]
    everything = await backfill(store, task, PAST[:3], only_missing=False)
    assert everything.occurrences == PAST[:3]


async def test_dry_run_answers_and_writes_nothing(store: TaskStore) -> None:
    task = await add(store, "buffer_all")
    made = await backfill(store, task, dry_run=True)
    assert statuses(made) == [RunStatus.RUNNING] + [RunStatus.QUEUED] * 4
    assert made.to_call()  # what would be called; the service calls nothing on a dry run
    assert await runs_of(store, task) == []
    with pytest.raises(BackfillNotFound):
        await backfills(store).cancel_backfill(made.backfill_id, NOW)


async def test_cancel_cancels_queued_runs_and_asks_running_ones_to_stop(
    store: TaskStore,
) -> None:
    task = await add(store, "buffer_all")
    made = await backfill(store, task)
    other = await backfill(store, task, [T0 + 50 * STEP], only_missing=False)
    assert await backfills(store).cancel_backfill(made.backfill_id, NOW + SECOND) == 5
    stored = {r.id: r for r in await runs_of(store, task)}
    running = made.made[0].run.id
    assert stored[running].status is RunStatus.RUNNING
    assert await store.cancel_reasons([running]) == {running: STOPPED_BY_BACKFILL}
    for claimed in made.made[1:]:
        run = stored[claimed.run.id]
        assert (run.status, run.error) == (RunStatus.CANCELLED, CANCELLED_BY_BACKFILL)
        assert run.finished_at == NOW + SECOND
    # Another backfill's run still waits.
    assert stored[other.made[0].run.id].status is RunStatus.QUEUED


async def test_unknown_ids(store: TaskStore) -> None:
    with pytest.raises(BackfillNotFound):
        await backfills(store).cancel_backfill(UUID(int=7), NOW)
    task = await add(store, "buffer_all")
    await store.delete_task(task.id)
    with pytest.raises(TaskNotFound):
        await backfill(store, task)


async def test_a_thousand_occurrences_at_once(store: TaskStore) -> None:
    task = await add(store, "buffer_all")
    occurrences = [T0 + step * STEP for step in range(1_000)]
    made = await backfill(store, task, occurrences)
    assert len(made.made) == 1_000
    assert len(await store.list_runs(task.id, None, None, 1_000)) == 1_000
