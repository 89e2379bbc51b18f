"""The engine contract for backfills (docs/policies.md, "Backfill"): backfilled runs made
through the use case, called by real engines (native and APScheduler) on every store."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest

from application.backfills import BackfillService
from application.ports import RunDispatcher
from domain.backfills import BackfillRequest
from domain.runs import Run, RunStatus
from domain.triggers import CronTrigger
from tests.fixtures.cluster import T0, Cluster, key_of, keys
from tests.fixtures.cluster import cluster as cluster  # fixtures
from tests.fixtures.cluster import engine_factory as engine_factory
from tests.fixtures.cluster import http_executor as http_executor
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.tasks import make_task

pytestmark = pytest.mark.filterwarnings("error")

DAY = timedelta(days=1)
DAILY = CronTrigger(expression="0 0 * * *", timezone="UTC")  # midnight UTC


def service_at_t0(cluster: Cluster, engine: RunDispatcher) -> BackfillService:
    """The backfill use case on the cluster's store, calling through `engine`, at T0."""
    cluster.clock.set(T0)
    return BackfillService(
        cluster.store.backfills,  # type: ignore[attr-defined]
        cluster.store.get_task,  # type: ignore[arg-type]
        cluster.clock,
        engine,
        replica="api-1",
    )


def in_turn(runs: list[Run]) -> None:
    """Each run started once the one before it (oldest occurrence first) had ended."""
    for before, after in itertools.pairwise(sorted(runs, key=lambda run: run.scheduled_for)):
        assert before.finished_at and after.started_at
        assert after.started_at >= before.finished_at


@pytest.mark.parametrize("overlap", ["buffer_all", "allow_all"])
async def test_backfilled_runs_carry_their_occurrences_idempotency_keys(
    cluster: Cluster, recording_target: RecordingTarget, overlap: str
) -> None:
    recording_target.respond("/daily", *[Response(delay=0.2)] * 3)
    # Created at T0 (noon): its next occurrence is tomorrow, so only the backfill makes
    # runs.
    task = await cluster.add(
        make_task(DAILY, url=recording_target.url("/daily"), overlap="buffer_all")
    )
    service = service_at_t0(cluster, await cluster.engine())
    midnight = T0.replace(hour=0)
    past = [midnight - 2 * DAY, midnight - DAY, midnight]
    made = await service.backfill(
        task.id,
        BackfillRequest(past[0], past[-1], overlap=overlap),  # type: ignore[arg-type]
    )
    assert made.occurrences == past
    runs = sorted(
        await cluster.wait_runs(task, 3, what="the backfill's runs to end"),
        key=lambda run: run.scheduled_for,
    )
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED] * 3
    assert {r.backfill_id for r in runs} == {made.backfill_id}
    # key=str: a key is a str (a call without one, None, matches no key of the other side).
    received_keys = sorted(keys(recording_target, "/daily"), key=str)
    assert received_keys == sorted(key_of(task, at) for at in past)
    if overlap == "buffer_all":  # one slot: one call after the other, oldest first
        assert keys(recording_target, "/daily") == [key_of(task, at) for at in past]
        in_turn(runs)


async def test_a_skip_task_backfilled_with_buffer_all_calls_one_after_the_other(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    """A default task (`overlap: "skip"`) keeps the backfill's queue: each run starts
    once, oldest first, as the slot frees, whichever of two engines frees it."""
    recording_target.respond("/daily", *[Response(delay=0.2)] * 4)
    task = await cluster.add(make_task(DAILY, url=recording_target.url("/daily")))
    assert task.overlap == "skip"
    first = await cluster.engine()
    await cluster.engine()
    service = service_at_t0(cluster, first)
    midnight = T0.replace(hour=0)
    past = [midnight - k * DAY for k in (3, 2, 1, 0)]
    made = await service.backfill(task.id, BackfillRequest(past[0], past[-1]))
    assert [c.run.status for c in made.made] == [RunStatus.RUNNING] + [RunStatus.QUEUED] * 3
    runs = await cluster.wait_runs(task, 4, what="the backfill's runs to end")
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED] * 4
    assert keys(recording_target, "/daily") == [key_of(task, at) for at in past]
    in_turn(runs)
