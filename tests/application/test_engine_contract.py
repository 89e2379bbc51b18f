"""The engine contract (issue 4): real trigger loops over every store backend, a fake
clock moved by hand, and the real HTTP executor calling a recording target on 127.0.0.1.
Every test also runs on the APScheduler engine adapter (issue 6), the `engine_factory`
parameter.

Nothing here sleeps and hopes: each test moves the clock explicitly and then waits, with
a bounded real timeout, for a condition on the store or the target. HTTP timeouts and
retry waits are real time, so the tests that need them use short ones.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import pytest

from adapters.memory import NoopExecutor
from application.engine_runs import CANCEL_ERROR, DRAIN_ERROR
from application.ports import EngineTestHooks
from domain.claims import initial_fire_at, lease_duration
from domain.runs import REPLICA_LOST, ClaimedRun, Run, RunStatus
from domain.tasks import RetryPolicy, Task
from domain.triggers import CronTrigger, IntervalTrigger, OneShotTrigger
from tests.fixtures.cluster import MINUTE, SECOND, T0, Cluster, key_of, keys, received, statuses
from tests.fixtures.cluster import cluster as cluster  # fixtures
from tests.fixtures.cluster import engine_factory as engine_factory
from tests.fixtures.cluster import http_executor as http_executor
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import WAIT, eventually

# -- firing ---------------------------------------------------------------------------


async def test_a_task_fires_on_time(cluster: Cluster, recording_target: RecordingTarget) -> None:
    task = await cluster.add(
        make_task(
            CronTrigger(expression="* * * * *"),
            url=recording_target.url("/on-time"),
            now=T0 - 30 * SECOND,
        )
    )
    assert task.next_run_at == T0
    engine = await cluster.engine()
    await cluster.advance_to(T0 - SECOND, engine)
    assert recording_target.received() == []
    assert await cluster.runs(task) == []

    cluster.clock.set(T0)
    [run] = await cluster.wait_runs(task, 1)
    assert (run.status, run.scheduled_for, run.coalesced, run.attempts) == (
        RunStatus.SUCCEEDED,
        T0,
        1,
        1,
    )
    assert (run.http_status, run.replica, run.manual) == (200, "engine-1", False)
    [request] = recording_target.received("/on-time")
    assert request.header("Idempotency-Key") == key_of(task, T0)
    assert request.header("X-Scheduler-Task-Id") == str(task.id)
    assert request.header("X-Scheduler-Run-Id") == str(run.id)
    assert request.header("X-Scheduler-Scheduled-For") == "2026-03-02T12:00:00Z"
    assert (await cluster.store.get_task(task.id)).next_run_at == T0 + MINUTE


@pytest.mark.parametrize("replicas", [2, 3])
async def test_engines_sharing_a_backend_fire_each_occurrence_once(
    cluster: Cluster, recording_target: RecordingTarget, replicas: int
) -> None:
    tasks = [
        await cluster.add(make_task(url=recording_target.url("/shared"), max_running_instances=5))
        for _ in range(40)
    ]
    engines = [await cluster.engine(batch_size=3) for _ in range(replicas)]
    minutes = 6
    for minute in range(minutes):
        await cluster.advance_to(T0 + minute * MINUTE, *engines)

        # Every run of this minute recorded before the clock moves on, so that no
        # lease expires under a run still in flight.
        for task in tasks:
            await cluster.wait_runs(task, minute + 1)
    for task in tasks:
        runs = await cluster.wait_runs(task, minutes)
        assert sorted(r.scheduled_for for r in runs) == [T0 + m * MINUTE for m in range(minutes)]
        assert set(statuses(runs)) == {RunStatus.SUCCEEDED}
    # The engines really shared the work.
    assert len({r.replica for t in tasks for r in await cluster.runs(t)}) >= 2
    expected = {key_of(t, T0 + m * MINUTE) for t in tasks for m in range(minutes)}
    seen = keys(recording_target, "/shared")
    assert len(seen) == len(expected)
    assert set(seen) == expected


async def test_a_late_claim_records_missed(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    task = await cluster.add(
        make_task(url=recording_target.url("/missed"), misfire_grace_seconds=10)
    )
    engine = await cluster.engine()
    await cluster.advance_to(T0 + 30 * SECOND, engine)  # the engine was held up 30 s
    [run] = await cluster.wait_runs(task, 1)
    assert (run.status, run.scheduled_for, run.attempts) == (RunStatus.MISSED, T0, 0)
    assert recording_target.received("/missed") == []
    assert (await cluster.store.get_task(task.id)).next_run_at == T0 + MINUTE


async def test_downtime_coalesces_into_one_run(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    task = await cluster.add(make_task(url=recording_target.url("/backlog")))
    cluster.clock.set(T0 + 5 * MINUTE + 10 * SECOND)  # no engine ran all this time
    await cluster.engine()
    [run] = await cluster.wait_runs(task, 1)
    assert (run.status, run.scheduled_for, run.coalesced) == (
        RunStatus.SUCCEEDED,
        T0 + 5 * MINUTE,
        6,
    )
    assert keys(recording_target, "/backlog") == [key_of(task, T0 + 5 * MINUTE)]


async def test_max_running_instances_skips_while_a_run_is_in_flight(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/slow", Response(delay=60), Response())  # held till released
    task = await cluster.add(
        make_task(IntervalTrigger(every=10, anchor=T0), url=recording_target.url("/slow"))
    )
    engine = await cluster.engine()
    cluster.clock.set(T0)
    await eventually(lambda: received(recording_target, "/slow", 1), "the first call")
    await cluster.advance_to(T0 + 10 * SECOND, engine)
    await cluster.wait_runs(task, 1, what="the second occurrence to be skipped")
    recording_target.release()
    runs = await cluster.wait_runs(task, 2, what="the first run to end")
    by_time = sorted(runs, key=lambda r: r.scheduled_for)
    assert statuses(by_time) == [RunStatus.SUCCEEDED, RunStatus.SKIPPED]
    assert len(recording_target.received("/slow")) == 1
    # The slot is free again once the first run ended.
    await cluster.advance_to(T0 + 20 * SECOND, engine)
    runs = await cluster.wait_runs(task, 3)
    assert max(runs, key=lambda r: r.scheduled_for).status is RunStatus.SUCCEEDED


async def test_a_killed_engines_lease_expires_and_frees_the_slot(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/lease", Response(delay=60), Response())
    task = await cluster.add(
        make_task(
            IntervalTrigger(every=20, anchor=T0), url=recording_target.url("/lease"), timeout=5
        )
    )
    doomed = await cluster.engine()
    cluster.clock.set(T0)
    await eventually(lambda: received(recording_target, "/lease", 1), "the hanging call")
    [first] = await cluster.wait_runs(task, 1, finished=False)
    assert first.lease_expires_at == T0 + 35 * SECOND
    await doomed.kill()  # no stop(): nothing is recorded, the lease stays

    survivor = await cluster.engine()
    await cluster.advance_to(T0 + 20 * SECOND, survivor)
    runs = {r.scheduled_for: r for r in await cluster.runs(task)}
    assert (runs[T0].status, runs[T0 + 20 * SECOND].status) == (
        RunStatus.RUNNING,
        RunStatus.SKIPPED,
    )
    await cluster.advance_to(T0 + 40 * SECOND, survivor)
    await cluster.wait_runs(task, 3)
    runs = {r.scheduled_for: r for r in await cluster.runs(task)}
    assert (runs[T0].status, runs[T0].error) == (RunStatus.FAILED, REPLICA_LOST)
    assert runs[T0 + 40 * SECOND].status is RunStatus.SUCCEEDED
    assert runs[T0 + 40 * SECOND].replica == survivor.settings.replica


async def test_a_disabled_task_does_not_fire(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    off = await cluster.add(make_task(url=recording_target.url("/off"), enabled=False))
    on = await cluster.add(make_task(url=recording_target.url("/on")))
    engine = await cluster.engine()
    for minute in range(2):
        await cluster.advance_to(T0 + minute * MINUTE, engine)
        await cluster.wait_runs(on, minute + 1)
    assert await cluster.runs(off) == []
    assert recording_target.received("/off") == []


async def test_a_changed_trigger_takes_effect_at_once(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    daily = CronTrigger(expression="0 0 * * *")
    task = await cluster.add(make_task(daily, url=recording_target.url("/changed")))
    assert task.next_run_at == datetime(2026, 3, 3, tzinfo=UTC)
    engine = await cluster.engine()
    await cluster.advance_to(T0 + 10 * SECOND, engine)
    assert recording_target.received("/changed") == []

    # As the update use case does: a new interval is anchored now and due at once.
    now = cluster.clock.now()
    changed = task.model_copy(
        update={"trigger": IntervalTrigger(every=3600, anchor=now), "updated_at": now}
    )
    fire = initial_fire_at(changed.trigger, now, changed.misfire_grace_seconds)
    changed = changed.model_copy(update={"next_fire_at": fire, "next_run_at": fire})
    await cluster.store.update_task(changed, task.version, reschedule=True)
    # No clock move: the store's notification wakes the engine.
    [run] = await cluster.wait_runs(task, 1)
    assert (run.status, run.scheduled_for) == (RunStatus.SUCCEEDED, now)
    assert (await cluster.store.get_task(task.id)).next_run_at == now + timedelta(hours=1)


async def test_a_one_shot_fires_once(cluster: Cluster, recording_target: RecordingTarget) -> None:
    task = await cluster.add(
        make_task(OneShotTrigger(run_at=T0 + MINUTE), url=recording_target.url("/once"))
    )
    engine = await cluster.engine()
    await cluster.advance_to(T0 + MINUTE, engine)
    [run] = await cluster.wait_runs(task, 1)
    assert (run.status, run.scheduled_for) == (RunStatus.SUCCEEDED, T0 + MINUTE)
    await cluster.advance_to(T0 + 10 * MINUTE, engine)
    assert len(await cluster.runs(task)) == 1
    assert len(recording_target.received("/once")) == 1
    spent = await cluster.store.get_task(task.id)
    assert (spent.enabled, spent.next_run_at) == (True, None)


async def test_a_saturated_engine_claims_half_its_ceiling_at_a_time(
    cluster: Cluster, recording_target: RecordingTarget, caplog: pytest.LogCaptureFixture
) -> None:
    """Both engines run the one claim pass: while every slot could be taken, a claim
    takes at most half the ceiling, so that one half is called while the other half's
    outcomes are recorded; each claim logs one line."""
    caplog.set_level(logging.INFO, logger="scheduler.engine")
    recording_target.respond("/busy", Response(delay=0.05))
    tasks = [await cluster.add(make_task(url=recording_target.url("/busy"))) for _ in range(12)]
    engine = await cluster.engine(max_concurrent_runs=4, batch_size=100)
    cluster.clock.set(T0)
    for task in tasks:
        [run] = await cluster.wait_runs(task, 1)
        assert run.status is RunStatus.SUCCEEDED
    claims = [
        record.__dict__["count"]
        for record in caplog.records
        if record.msg == "claimed %d runs" and record.__dict__["replica"] == "engine-1"
    ]
    assert sum(claims) == 12
    assert max(claims) == 2

    async def every_slot_freed() -> bool:
        # The engine frees a run's slot just after its outcome is written.
        return engine.in_flight == 0

    await eventually(every_slot_freed, "every slot to be freed")


async def test_a_hanging_target_times_out_without_delaying_others(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/hang", Response(delay=60))
    hanging = await cluster.add(make_task(url=recording_target.url("/hang"), timeout=1))
    quick = [
        await cluster.add(make_task(url=recording_target.url(f"/quick-{i}"))) for i in range(3)
    ]
    await cluster.engine(batch_size=1)
    cluster.clock.set(T0)
    for task in quick:
        [run] = await cluster.wait_runs(task, 1)
        assert run.status is RunStatus.SUCCEEDED
    # The quick runs did not wait for the hanging one: it is still in its call.
    assert statuses(await cluster.runs(hanging)) == [RunStatus.RUNNING]
    # It ends on its own timeout (1 s), long before the target would answer (60 s).
    [run] = await cluster.wait_runs(hanging, 1)
    assert (run.status, run.error) == (RunStatus.FAILED, "timed out after 1s")


async def test_a_clean_stop_leaves_nothing_running(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/stuck", Response(delay=60))
    recording_target.respond("/brief", Response(delay=0.3))
    stuck = await cluster.add(make_task(url=recording_target.url("/stuck"), timeout=60))
    brief = await cluster.add(make_task(url=recording_target.url("/brief")))
    engine = await cluster.engine(drain_timeout=1.0)
    cluster.clock.set(T0)
    await eventually(lambda: received(recording_target, "/stuck", 1), "the stuck call")
    await eventually(lambda: received(recording_target, "/brief", 1), "the brief call")
    # Stopping waits out the drain (1 s), not the stuck call (60 s): were it waiting for
    # the call, this deadline (WAIT, 30 s) would end it first.
    async with asyncio.timeout(WAIT):
        await engine.stop()
    assert not engine.alive
    [stuck_run] = await cluster.runs(stuck)
    assert (stuck_run.status, stuck_run.error) == (RunStatus.FAILED, DRAIN_ERROR)
    [brief_run] = await cluster.runs(brief)
    assert brief_run.status is RunStatus.SUCCEEDED


async def test_a_cancel_through_one_engine_stops_a_run_on_another(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/cancel", Response(delay=60))
    task = await cluster.add(make_task(url=recording_target.url("/cancel"), timeout=60))
    engines = [await cluster.engine(), await cluster.engine()]
    cluster.clock.set(T0)
    await eventually(lambda: received(recording_target, "/cancel", 1), "the call")
    [run] = await cluster.wait_runs(task, 1, finished=False)
    owner = next(i for i, e in enumerate(engines) if e.settings.replica == run.replica)
    other_store = cluster.stores[1 - owner]
    await other_store.request_cancel(run.id)
    [cancelled] = await cluster.wait_runs(task, 1)
    assert (cancelled.status, cancelled.error) == (RunStatus.CANCELLED, CANCEL_ERROR)
    owner_engine = engines[owner]

    async def slot_freed() -> bool:
        # The engine frees the run's slot just after its outcome is written.
        return owner_engine.in_flight == 0

    await eventually(slot_freed, "the owner to free the run's slot")


async def test_a_cancel_stops_a_run_whose_task_was_deleted(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    """A task's delete lets its runs in flight finish, and a cancel still stops them."""
    recording_target.respond("/gone", Response(delay=60))
    task = await cluster.add(make_task(url=recording_target.url("/gone"), timeout=60))
    await cluster.engine()
    cluster.clock.set(T0)
    await eventually(lambda: received(recording_target, "/gone", 1), "the call")
    [run] = await cluster.wait_runs(task, 1, finished=False)
    await cluster.stores[0].delete_task(task.id)
    await cluster.stores[0].request_cancel(run.id)
    [cancelled] = await cluster.wait_runs(task, 1)
    assert (cancelled.status, cancelled.error) == (RunStatus.CANCELLED, CANCEL_ERROR)


async def test_retries_follow_the_retry_policy(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/flaky", Response(503), Response(503), Response(200))
    recording_target.respond("/bad", Response(400))
    retry = RetryPolicy(max_attempts=3, backoff_seconds=0.05, max_backoff_seconds=0.1)
    flaky = await cluster.add(make_task(url=recording_target.url("/flaky"), retry=retry))
    bad = await cluster.add(make_task(url=recording_target.url("/bad"), retry=retry))
    await cluster.engine()
    cluster.clock.set(T0)
    [run] = await cluster.wait_runs(flaky, 1)
    assert (run.status, run.attempts, run.http_status) == (RunStatus.SUCCEEDED, 3, 200)
    assert keys(recording_target, "/flaky") == [key_of(flaky, T0)] * 3
    [run] = await cluster.wait_runs(bad, 1)
    assert (run.status, run.attempts, run.http_status) == (RunStatus.FAILED, 1, 400)
    assert len(recording_target.received("/bad")) == 1


async def test_pause_after_failures_disables_the_task(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/failing", Response(500), Response(200), Response(500))
    task = await cluster.add(
        make_task(url=recording_target.url("/failing"), pause_after_failures=2)
    )
    engine = await cluster.engine()
    expected = [(1, True), (0, True), (1, True), (2, False)]
    for minute, (failures, enabled) in enumerate(expected):
        await cluster.advance_to(T0 + minute * MINUTE, engine)
        await cluster.wait_runs(task, minute + 1)
        current = await cluster.store.get_task(task.id)
        assert (current.consecutive_failures, current.enabled) == (failures, enabled)
    assert current.next_run_at is None
    await cluster.advance_to(T0 + 10 * MINUTE, engine)
    assert len(await cluster.runs(task)) == 4


async def test_a_manual_run_is_dispatched_on_the_engine(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    task = await cluster.add(make_task(url=recording_target.url("/manual"), enabled=False))
    engine = await cluster.engine(executor=NoopExecutor(cluster.clock))
    claimed = await cluster.store.start_manual_run(task.id, cluster.clock.now(), "api")
    engine.dispatch(claimed)
    [run] = await cluster.wait_runs(task, 1)
    assert (run.status, run.manual) == (RunStatus.SUCCEEDED, True)


async def hold_the_only_slot(
    cluster: Cluster, engine: EngineTestHooks, target: RecordingTarget
) -> tuple[Task, Run]:
    """A manual run of a new task whose call holds `engine`'s one call slot until
    `target.release()`: the task and its run."""
    target.respond("/held", Response(delay=WAIT))
    held = await cluster.add(make_task(url=target.url("/held"), enabled=False))
    claimed = await cluster.store.start_manual_run(held.id, cluster.clock.now(), "api")
    engine.dispatch(claimed)

    async def calling() -> bool:
        return bool(target.received("/held"))

    await eventually(calling, "the held call")
    return held, claimed.run


async def test_a_manual_fire_finding_every_call_slot_of_its_replica_taken_is_skipped(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    # Waiting for a call slot would hold the task's slot (its lease) meanwhile, and could
    # outlast the lease: the run is recorded SKIPPED at once, and says why.
    other = await cluster.add(make_task(url=recording_target.url("/other"), enabled=False))
    engine = await cluster.engine(max_concurrent_runs=1)

    async def fire(task: Task) -> Run:  # as the API's fire now does
        busy = engine.busy()
        claimed = await cluster.store.start_manual_run(task.id, cluster.clock.now(), "api", busy)
        engine.dispatch(claimed)
        return claimed.run

    async def free() -> bool:
        return engine.busy() is None

    assert await free()
    held, first = await hold_the_only_slot(cluster, engine, recording_target)
    skipped = await fire(other)
    assert (skipped.status, skipped.lease_expires_at) == (RunStatus.SKIPPED, None)
    assert skipped.error == (
        "fired on a replica already making its max_concurrent_runs = 1 calls; not called"
    )
    recording_target.release()
    [done] = await cluster.wait_runs(held, 1)
    assert (done.id, done.status) == (first.id, RunStatus.SUCCEEDED)
    await eventually(free, "the call slot to free")
    called = await fire(other)
    assert called.status is RunStatus.RUNNING
    runs = await cluster.wait_runs(other, 2)
    assert sorted(r.status for r in runs) == sorted([RunStatus.SKIPPED, RunStatus.SUCCEEDED])
    assert len(recording_target.received("/other")) == 1


async def test_a_run_that_waited_for_a_call_slot_is_called_on_a_renewed_lease(
    cluster: Cluster, recording_target: RecordingTarget
) -> None:
    # An `allow_all` backfill's runs beyond the ceiling wait for call slots holding their
    # leases: one that waited most of its lease starts on a renewed one, with the whole
    # budget of its attempts, not on what the wait left (nothing, for those after it).
    waiting = await cluster.add(make_task(url=recording_target.url("/waited"), enabled=False))
    engine = await cluster.engine(max_concurrent_runs=1)
    now = cluster.clock.now()
    await hold_the_only_slot(cluster, engine, recording_target)
    run = (await cluster.store.start_manual_run(waiting.id, now, "api")).run
    engine.dispatch(ClaimedRun(task=waiting, run=run))
    lease = lease_duration(waiting.target)
    assert run.lease_expires_at is not None
    cluster.clock.set(run.lease_expires_at - 10 * SECOND)  # 15 s of budget gone already
    recording_target.release()

    [done] = await cluster.wait_runs(waiting, 1)
    assert (done.id, done.status, done.error) == (run.id, RunStatus.SUCCEEDED, None)
    assert done.lease_expires_at == run.lease_expires_at - 10 * SECOND + lease
    assert len(recording_target.received("/waited")) == 1
