"""Claims across replicas: each store has its own pool, so claimers are separate
connections whose transactions really overlap on the server."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import datetime

import pytest

from adapters.postgres import PostgresTaskStore
from domain.claims import run_instant
from domain.runs import REPLICA_LOST, Run, RunOutcome, RunStatus
from domain.tasks import HttpTarget, Task
from domain.triggers import CronTrigger, IntervalTrigger
from tests.adapters.postgres.support import MINUTE, SECOND, T0, one_connection, query
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import make_task

pytestmark = pytest.mark.postgres


async def drain(store: PostgresTaskStore, now: datetime, batch: int, replica: str) -> list[Run]:
    """Claim at `now` until nothing is left for this claimer."""
    runs: list[Run] = []
    while claimed := await store.claim_due(now, batch, replica):
        runs.extend(c.run for c in claimed)
    return runs


async def stores(backend: PostgresBackend, count: int) -> list[PostgresTaskStore]:
    return [await backend.new_store() for _ in range(count)]


@pytest.mark.parametrize("claimers", [2, 3])
async def test_concurrent_claimers_receive_disjoint_sets(
    postgres_backend: PostgresBackend, claimers: int
) -> None:
    replicas = await stores(postgres_backend, claimers)
    tasks = [make_task() for _ in range(240)]
    for task in tasks:
        await replicas[0].create_task(task)
    batches = [1, 7, 40][:claimers]
    results = await asyncio.gather(
        *(drain(s, T0, b, f"r{i}") for i, (s, b) in enumerate(zip(replicas, batches, strict=True)))
    )
    claimed = [{run.task_id for run in runs} for runs in results]
    assert sum(len(runs) for runs in results) == len(tasks)
    assert set().union(*claimed) == {task.id for task in tasks}
    for i, mine in enumerate(claimed):
        for theirs in claimed[i + 1 :]:
            assert not mine & theirs
    [(count,)] = await query(
        postgres_backend.url, "SELECT count(*) FROM {schema}.runs", postgres_backend.schema
    )
    assert count == len(tasks)


def expected_occurrences(task: Task, until: datetime) -> list[datetime]:
    """Every occurrence of `task` whose jittered instant is at or before `until`."""
    found = []
    occurrence = task.next_fire_at
    while occurrence is not None and (run_instant(task, occurrence) or occurrence) <= until:
        found.append(occurrence)
        occurrence = task.trigger.next_fire_time(occurrence)
    return found


async def test_every_occurrence_is_claimed_exactly_once(postgres_backend: PostgresBackend) -> None:
    replicas = await stores(postgres_backend, 3)
    tasks = [
        make_task(CronTrigger(expression="* * * * *"), jitter_seconds=25),
        make_task(CronTrigger(expression="*/2 * * * *")),
        make_task(IntervalTrigger(every=60, anchor=T0)),
        make_task(IntervalTrigger(every=90, anchor=T0 + 7 * SECOND), jitter_seconds=20),
        make_task(IntervalTrigger(every=45, anchor=T0), max_running_instances=3),
    ]
    tasks += [make_task(CronTrigger(expression="* * * * *"), jitter_seconds=30) for _ in range(7)]
    for task in tasks:
        await replicas[0].create_task(task)
    step = 15 * SECOND
    now = T0
    end = T0 + 30 * MINUTE
    while now <= end:
        await asyncio.gather(
            *(
                drain(s, now, b, f"r{i}")
                for i, (s, b) in enumerate(zip(replicas, [1, 3, 50], strict=True))
            )
        )
        now += step
    for task in tasks:
        runs = await replicas[1].list_runs(task.id, None, None, 1000)
        scheduled = sorted(run.scheduled_for for run in runs)
        assert scheduled == expected_occurrences(task, end), task.trigger
        assert all(run.coalesced == 1 for run in runs)


async def test_misfire_and_coalescing_across_replicas(postgres_backend: PostgresBackend) -> None:
    first, second = await stores(postgres_backend, 2)
    lenient = await first.create_task(make_task(misfire_grace_seconds=60))
    strict = await first.create_task(make_task(misfire_grace_seconds=0))
    assert {r.status for r in await drain(first, T0, 10, "a")} == {RunStatus.RUNNING}
    # Every replica is down for ten minutes; the one that comes back claims the backlog.
    late = T0 + 10 * MINUTE + 5 * SECOND
    runs = {run.task_id: run for run in await drain(second, late, 10, "b")}
    assert (runs[lenient.id].status, runs[lenient.id].coalesced) == (RunStatus.RUNNING, 10)
    assert (runs[strict.id].status, runs[strict.id].coalesced) == (RunStatus.MISSED, 10)
    assert runs[strict.id].scheduled_for == runs[lenient.id].scheduled_for == T0 + 10 * MINUTE
    assert runs[strict.id].finished_at is not None
    for task in (lenient, strict):
        assert (await first.get_task(task.id)).next_run_at == T0 + 11 * MINUTE
        assert await first.get_run(runs[task.id].id) == runs[task.id]  # as stored
    # Only a run that is called moves last_run_at.
    assert (await first.get_task(lenient.id)).last_run_at == late
    assert (await first.get_task(strict.id)).last_run_at == T0
    assert await drain(first, late, 10, "a") == []


async def test_lease_limit_holds_across_replicas(postgres_backend: PostgresBackend) -> None:
    replicas = await stores(postgres_backend, 3)
    task = await replicas[0].create_task(make_task(max_running_instances=3))
    manual = [replicas[i % 3].start_manual_run(task.id, T0, f"r{i % 3}") for i in range(24)]
    scheduled = [replicas[i].claim_due(T0, 5, f"r{i}") for i in range(3)]
    # Both kinds at once, each gathered in the order given: typed, unlike one mixed list.
    started, batches = await asyncio.gather(asyncio.gather(*manual), asyncio.gather(*scheduled))
    runs = [r.run for r in started] + [c.run for batch in batches for c in batch]
    assert len(runs) == 25  # every manual run, and the one scheduled occurrence once
    assert Counter(run.status for run in runs) == {RunStatus.RUNNING: 3, RunStatus.SKIPPED: 22}
    leases = await query(
        postgres_backend.url,
        "SELECT run_id FROM {schema}.run_leases WHERE task_id = %s",
        postgres_backend.schema,
        task.id,
    )
    assert {row[0] for row in leases} == {r.id for r in runs if r.status is RunStatus.RUNNING}
    for run in runs:
        assert await replicas[0].get_run(run.id) == run  # as stored


async def test_an_expired_lease_frees_the_slot_of_a_lost_replica(
    postgres_backend: PostgresBackend,
) -> None:
    lost, survivor = await stores(postgres_backend, 2)
    await lost.create_task(make_task(timeout=100))  # a lease of 130 s
    [orphan] = await drain(lost, T0, 10, "lost")
    assert orphan.lease_expires_at == T0 + 130 * SECOND
    [skipped] = await drain(survivor, T0 + MINUTE, 10, "survivor")
    assert skipped.status is RunStatus.SKIPPED
    [running] = await drain(survivor, T0 + 3 * MINUTE, 10, "survivor")
    assert running.status is RunStatus.RUNNING
    [expired] = await survivor.expire_lost_runs(T0 + 3 * MINUTE)
    assert (expired.id, expired.status, expired.error) == (
        orphan.id,
        RunStatus.FAILED,
        REPLICA_LOST,
    )
    leases = await query(
        postgres_backend.url, "SELECT run_id FROM {schema}.run_leases", postgres_backend.schema
    )
    assert leases == [(running.id,)]


async def test_finishing_deletes_the_lease(postgres_backend: PostgresBackend) -> None:
    one, other = await stores(postgres_backend, 2)
    await one.create_task(make_task())
    [run] = await drain(one, T0, 10, "one")
    finished = await finish_one(
        one, run.id, RunOutcome(status=RunStatus.SUCCEEDED, attempts=1, finished_at=T0 + SECOND)
    )
    assert finished.status is RunStatus.SUCCEEDED
    leases = await query(
        postgres_backend.url, "SELECT count(*) FROM {schema}.run_leases", postgres_backend.schema
    )
    assert leases == [(0,)]
    [next_run] = await drain(other, T0 + MINUTE, 10, "other")
    assert next_run.status is RunStatus.RUNNING


@pytest.mark.parametrize("batch", [1, 50])
async def test_a_claim_batch_costs_three_round_trips(
    postgres_backend: PostgresBackend, batch: int
) -> None:
    async with one_connection(postgres_backend) as one:
        store = one.store
        for _ in range(batch * 8):
            await store.create_task(make_task())
        for _ in range(6):  # past psycopg's prepare threshold as well
            await store.claim_due(T0, batch, "r")
        claimed, trips = await one.round_trips(lambda: store.claim_due(T0, batch, "r"))
    assert len(claimed) == batch
    assert trips == 3


async def test_a_stored_target_is_not_checked_again_when_claimed(
    postgres_backend: PostgresBackend,
) -> None:
    # Targets are checked when written (the API refuses a reserved header); read back,
    # only pydantic's own types and bounds are checked (domain.read_back.READ_BACK), so a task
    # stored under older rules keeps firing.
    store = await postgres_backend.new_store()
    task = make_task(due=T0)
    await store.create_task(task)
    await query(
        postgres_backend.url,
        "UPDATE {schema}.tasks SET target = jsonb_set(target, '{{headers}}', %s::jsonb)",
        postgres_backend.schema,
        '{"Host": "old.example"}',
    )
    [claimed] = await store.claim_due(T0, 10, "r1")
    assert claimed.task.target.headers == {"Host": "old.example"}
    with pytest.raises(ValueError, match="set by the scheduler"):
        HttpTarget.model_validate(claimed.task.target.model_dump() | {"headers": {"Host": "x"}})


async def test_a_row_that_does_not_validate_is_left_and_the_others_claimed(
    postgres_backend: PostgresBackend,
) -> None:
    store = await postgres_backend.new_store()
    broken, fine = make_task(due=T0), make_task(due=T0)
    for task in (broken, fine):
        await store.create_task(task)
    await query(
        postgres_backend.url,
        "UPDATE {schema}.tasks SET target = jsonb_set(target, '{{timeout_seconds}}', '-1')"
        " WHERE id = %s",
        postgres_backend.schema,
        broken.id,
    )
    claimed = await store.claim_due(T0, 10, "r1")
    assert [c.task.id for c in claimed] == [fine.id]
