"""The engine contract for `overlap` (docs/policies.md, "Overlap"): queued runs through
real engines (native and APScheduler) on every store, calling a recording target."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest

from domain.overlap import replaced_by
from domain.runs import REPLICA_LOST, Run, RunStatus
from domain.triggers import IntervalTrigger
from tests.fixtures.cluster import (
    SECOND,
    T0,
    Cluster,
    key_of,
    keys,
    received,
)
from tests.fixtures.cluster import cluster as cluster  # fixtures
from tests.fixtures.cluster import engine_factory as engine_factory
from tests.fixtures.cluster import http_executor as http_executor
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually

pytestmark = pytest.mark.filterwarnings("error")


def by_time(runs: list[Run]) -> list[Run]:
    return sorted(runs, key=lambda run: run.scheduled_for)


async def test_three_engines_start_each_queued_run_once_in_order(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    # Slow calls: while one runs, the next occurrences wait in the queue.
    recording_target.respond("/buffer", *[Response(delay=0.5)] * 5)
    task = await cluster.add(
        make_task(
            IntervalTrigger(every=10, anchor=T0),
            url=recording_target.url("/buffer"),
            timeout=30,  # a lease of 60 s: no run's lease expires while the clock moves
            overlap="buffer_all",
            misfire_grace_seconds=None,
        )
    )
    engines = [await cluster.engine() for _ in range(3)]
    cluster.clock.set(T0)
    await eventually(lambda: received(recording_target, "/buffer", 1), "the first call")
    for step in (1, 2, 3, 4):
        await cluster.advance_to(T0 + step * 10 * SECOND, *engines)
    queued = [r for r in await cluster.runs(task) if r.status is RunStatus.QUEUED]
    assert queued, "the occurrences claimed during the first call wait in the queue"
    runs = by_time(await cluster.wait_runs(task, 5, what="every queued run to end"))
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED] * 5
    occurrences = [T0 + step * 10 * SECOND for step in range(5)]
    assert keys(recording_target, "/buffer") == [key_of(task, at) for at in occurrences]
    # Never two calls at once: each started once the one before it had ended.
    for before, after in itertools.pairwise(runs):
        assert before.finished_at is not None and after.started_at is not None
        assert after.started_at >= before.finished_at


async def test_a_killed_replica_holding_the_slot_frees_it_for_the_queue(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/lost", Response(delay=60), Response(), Response(), Response())
    task = await cluster.add(
        make_task(
            IntervalTrigger(every=10, anchor=T0),
            url=recording_target.url("/lost"),
            timeout=5,  # a lease of 35 s
            overlap="buffer_all",
            misfire_grace_seconds=None,
        )
    )
    doomed = await cluster.engine()
    cluster.clock.set(T0)
    await eventually(lambda: received(recording_target, "/lost", 1), "the hanging call")
    await doomed.kill()  # no stop(): nothing is recorded, the lease stays
    survivor = await cluster.engine(lost_run_sweep_interval=timedelta(seconds=1))
    await cluster.advance_to(T0 + 10 * SECOND, survivor)
    await cluster.advance_to(T0 + 20 * SECOND, survivor)
    waiting = by_time(await cluster.runs(task))
    assert [r.status for r in waiting] == [RunStatus.RUNNING, RunStatus.QUEUED, RunStatus.QUEUED]
    assert len(recording_target.received("/lost")) == 1

    await cluster.advance_to(T0 + 36 * SECOND, survivor)
    runs = by_time(await cluster.wait_runs(task, 4, what="the queue to drain"))
    assert (runs[0].status, runs[0].error) == (RunStatus.FAILED, REPLICA_LOST)
    assert [r.status for r in runs[1:]] == [RunStatus.SUCCEEDED] * 3
    assert {r.replica for r in runs[1:]} == {survivor.settings.replica}
    occurrences = [T0 + step * 10 * SECOND for step in range(4)]
    assert keys(recording_target, "/lost") == [key_of(task, at) for at in occurrences]


async def test_replace_stops_the_run_in_flight_and_calls_the_new_one(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/replace", Response(delay=60), Response())
    task = await cluster.add(
        make_task(
            IntervalTrigger(every=10, anchor=T0),
            url=recording_target.url("/replace"),
            timeout=60,
            overlap="replace",
            misfire_grace_seconds=None,
        )
    )
    engines = [await cluster.engine(), await cluster.engine()]
    cluster.clock.set(T0)
    await eventually(lambda: received(recording_target, "/replace", 1), "the hanging call")
    await cluster.advance_to(T0 + 10 * SECOND, *engines)
    old, new = by_time(await cluster.wait_runs(task, 2, what="both runs to end"))
    assert (old.status, old.error) == (RunStatus.CANCELLED, replaced_by(new.id))
    assert old.attempts == 1  # its target received the call it was replaced in
    assert new.status is RunStatus.SUCCEEDED
    assert keys(recording_target, "/replace") == [key_of(task, T0), key_of(task, new.scheduled_for)]
