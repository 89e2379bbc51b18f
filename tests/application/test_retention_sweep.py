"""The engine's retention sweep and `history_limit` (docs/engine.md, "Sweeps"): a task
with a limit is trimmed to its newest finished runs by the running engine, in batches,
whatever the runs' age. Runs and superseded task versions past the retention age go too."""

from __future__ import annotations

from datetime import timedelta

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore, NoopExecutor
from application.engine import TriggerLoop
from domain.runs import RunOutcome, RunStatus
from tests.application.engine_support import T0, settings
from tests.application.engine_support import clock as clock  # fixtures
from tests.application.engine_support import engines as engines
from tests.application.engine_support import store as store
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually

MINUTE = timedelta(minutes=1)


async def test_the_sweep_keeps_the_newest_runs_of_a_task_with_a_history_limit(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    task = await store.create_task(make_task(now=T0 - 5 * MINUTE, history_limit=2))
    for minutes in range(5, 0, -1):
        [claimed] = await store.claim_due(T0 - minutes * MINUTE, 10, "old")
        done = RunOutcome(status=RunStatus.SUCCEEDED, finished_at=T0 - minutes * MINUTE)
        await finish_one(store, claimed.run.id, done)
    paused = (await store.get_task(task.id)).model_copy(
        update={"enabled": False, "next_fire_at": None, "next_run_at": None}
    )
    await store.update_task(paused, 1, reschedule=True)
    # Runs a minute old are far inside the age retention: only the limit removes them.
    engine = TriggerLoop(
        store, store.new_waker(), NoopExecutor(clock), clock, settings(retention_batch_size=1)
    )
    engines.append(engine)
    await engine.start()

    async def trimmed() -> bool:
        runs = await store.list_runs(task.id, None, None, 10)
        return [r.scheduled_for for r in runs] == [T0 - 1 * MINUTE, T0 - 2 * MINUTE]

    await eventually(trimmed, "the runs past the history limit to be deleted")


async def test_the_retention_sweep_deletes_old_runs_and_task_versions(
    store: InMemoryTaskStore, clock: FakeClock, engines: list[TriggerLoop]
) -> None:
    task = await store.create_task(make_task(now=T0 - timedelta(days=40)))
    [claimed] = await store.claim_due(T0 - timedelta(days=40), 10, "old")
    await finish_one(store, claimed.run.id, RunOutcome(status=RunStatus.SUCCEEDED, finished_at=T0))
    paused = (await store.get_task(task.id)).model_copy(
        update={"enabled": False, "next_fire_at": None, "next_run_at": None}
    )
    await store.update_task(paused, 1, reschedule=True)
    engine = TriggerLoop(
        store,
        store.new_waker(),
        NoopExecutor(clock),
        clock,
        settings(retention_batch_size=1),
    )
    engines.append(engine)
    await engine.start()

    async def gone() -> bool:
        return await store.list_runs(task.id, None, None, 10) == []

    await eventually(gone, "the old run to be deleted")

    # Task history goes with them, but for the version in force at the cutoff.
    async def superseded_gone() -> bool:
        versions = await store.task_history(task.id, None, 10)
        return [v.version for v in versions] == [2]

    await eventually(superseded_gone, "the superseded task version to be deleted")
