"""The engine contract for runs the engine stops (a cancel through the API, the drain
timeout at shutdown, the lease's budget): the recorded run says what its call made until
then. `attempts` counts every attempt begun (each before anything of it is sent), so a
run whose target received its request never reads 0, and one stopped before its call
never reads more; `http_status` and `response_excerpt` are those of the last attempt that
ended.

Real engines (both) over every backend, the real HTTP executor and a recording target,
as in test_engine_contract; the tests wait on what the target received, never on time.
"""

from __future__ import annotations

from datetime import timedelta

from application.engine_runs import CANCEL_ERROR, DRAIN_ERROR, LEASE_ERROR
from domain.claims import LEASE_MARGIN, lease_duration
from domain.runs import RunStatus
from domain.tasks import RetryPolicy
from domain.triggers import IntervalTrigger
from tests.fixtures.cluster import T0, Cluster, received
from tests.fixtures.cluster import cluster as cluster  # fixtures
from tests.fixtures.cluster import engine_factory as engine_factory
from tests.fixtures.cluster import http_executor as http_executor
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually

# A retry soon after a 500, then a call that hangs until the run is stopped.
RETRY = RetryPolicy(max_attempts=3, backoff_seconds=0.01, max_backoff_seconds=0.01)
FAILING_THEN_HANGING = (Response(500, b"try again"), Response(delay=60))


async def test_a_run_cancelled_during_its_call_counts_the_attempt(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/hang", Response(delay=60))
    task = await cluster.add(make_task(url=recording_target.url("/hang"), timeout=60))
    await cluster.engine(drain_timeout=0.2)
    cluster.clock.set(T0)
    await eventually(lambda: received(recording_target, "/hang", 1), "the call")
    [run] = await cluster.wait_runs(task, 1, finished=False)
    await cluster.store.request_cancel(run.id)
    [cancelled] = await cluster.wait_runs(task, 1, what="the run to be cancelled")
    assert (cancelled.status, cancelled.error) == (RunStatus.CANCELLED, CANCEL_ERROR)
    assert (cancelled.attempts, cancelled.started_at) == (1, T0)
    assert (cancelled.http_status, cancelled.response_excerpt) == (None, None)


async def test_a_run_cancelled_during_a_retry_keeps_the_answer_before_it(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/flaky", *FAILING_THEN_HANGING)
    task = await cluster.add(make_task(url=recording_target.url("/flaky"), timeout=60, retry=RETRY))
    await cluster.engine(drain_timeout=0.2)
    cluster.clock.set(T0)
    await eventually(lambda: received(recording_target, "/flaky", 2), "the second attempt")
    [run] = await cluster.wait_runs(task, 1, finished=False)
    await cluster.store.request_cancel(run.id)
    [cancelled] = await cluster.wait_runs(task, 1, what="the run to be cancelled")
    assert (cancelled.status, cancelled.error) == (RunStatus.CANCELLED, CANCEL_ERROR)
    assert (cancelled.attempts, cancelled.started_at) == (2, T0)
    assert (cancelled.http_status, cancelled.response_excerpt) == (500, "try again")


async def test_a_run_cancelled_while_waiting_for_the_ceiling_made_no_call(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/busy", Response(delay=60))
    busy = await cluster.add(make_task(url=recording_target.url("/busy"), timeout=60))
    waiting = await cluster.add(
        make_task(IntervalTrigger(every=3600), url=recording_target.url("/waiting"), enabled=False)
    )
    engine = await cluster.engine(max_concurrent_runs=1, drain_timeout=0.2)
    cluster.clock.set(T0)
    await eventually(lambda: received(recording_target, "/busy", 1), "the call holding the slot")
    # A manual run (the only kind that may wait for the ceiling) behind the busy one.
    claimed = await cluster.store.start_manual_run(waiting.id, cluster.clock.now(), "api")
    engine.dispatch(claimed)

    async def both_in_flight() -> bool:
        return engine.in_flight == 2

    await eventually(both_in_flight, "the manual run to wait for the slot")
    await cluster.store.request_cancel(claimed.run.id)
    [cancelled] = await cluster.wait_runs(waiting, 1, what="the waiting run to be cancelled")
    assert (cancelled.status, cancelled.error) == (RunStatus.CANCELLED, CANCEL_ERROR)
    assert (cancelled.attempts, cancelled.http_status, cancelled.response_excerpt) == (
        0,
        None,
        None,
    )
    assert recording_target.received("/waiting") == []
    [still] = await cluster.wait_runs(busy, 1, finished=False)
    assert still.status is RunStatus.RUNNING


async def test_runs_cut_by_the_drain_timeout_count_their_attempts(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/stuck", Response(delay=60))
    recording_target.respond("/flaky", *FAILING_THEN_HANGING)
    stuck = await cluster.add(make_task(url=recording_target.url("/stuck"), timeout=60))
    flaky = await cluster.add(
        make_task(url=recording_target.url("/flaky"), timeout=60, retry=RETRY)
    )
    engine = await cluster.engine(drain_timeout=0.2)
    cluster.clock.set(T0)
    await eventually(lambda: received(recording_target, "/stuck", 1), "the stuck call")
    await eventually(lambda: received(recording_target, "/flaky", 2), "the second attempt")
    await engine.stop()
    [stuck_run] = await cluster.runs(stuck)
    assert (stuck_run.status, stuck_run.error) == (RunStatus.FAILED, DRAIN_ERROR)
    assert (stuck_run.attempts, stuck_run.started_at, stuck_run.http_status) == (1, T0, None)
    [flaky_run] = await cluster.runs(flaky)
    assert (flaky_run.status, flaky_run.error) == (RunStatus.FAILED, DRAIN_ERROR)
    assert (flaky_run.attempts, flaky_run.started_at) == (2, T0)
    assert (flaky_run.http_status, flaky_run.response_excerpt) == (500, "try again")


async def test_a_run_stopped_at_its_lease_counts_its_attempt(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/late", Response(delay=60))
    task = await cluster.add(
        make_task(
            IntervalTrigger(every=3600),
            url=recording_target.url("/late"),
            timeout=60,
            enabled=False,
        )
    )
    engine = await cluster.engine(drain_timeout=0.2)
    # Claimed so long ago that one second of its lease is left before half the margin:
    # the call gets that second (real time), then the engine stops it.
    ago = lease_duration(task.target) - LEASE_MARGIN / 2 - timedelta(seconds=1)
    now = cluster.clock.now()
    claimed = await cluster.store.start_manual_run(task.id, now - ago, "api")
    engine.dispatch(claimed)
    [run] = await cluster.wait_runs(task, 1, what="the call to be stopped at its lease")
    assert (run.status, run.error) == (RunStatus.FAILED, LEASE_ERROR)
    assert (run.attempts, run.started_at, run.http_status) == (1, now, None)
    assert len(recording_target.received("/late")) == 1
