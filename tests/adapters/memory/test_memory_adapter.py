"""What only the in-memory adapter has: copies, its lock, its wakers, the no-op executor."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from adapters.clock import FakeClock
from adapters.memory import InMemoryTaskStore, NoopExecutor
from application.ports import CallProgress, TaskFilter
from domain.runs import Run, RunStatus
from domain.tasks import BearerAuth, HttpTarget
from domain.triggers import IntervalTrigger
from tests.fixtures.tasks import make_task

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


EVERY_SECOND = IntervalTrigger(every=1)


def target() -> HttpTarget:
    """A target of its own for each task, with headers and a body to copy (or share)."""
    return HttpTarget(url="http://127.0.0.1:9/", headers={"X-A": "1"}, body={"k": [1]})


async def test_callers_never_share_state_with_the_store() -> None:
    store = InMemoryTaskStore()
    task = make_task(EVERY_SECOND, target=target())
    created = await store.create_task(task)
    task.target.headers["X-A"] = "changed"
    created.target.headers["X-B"] = "added"
    fetched = await store.get_task(task.id)
    assert fetched.target.headers == {"X-A": "1"}
    fetched.tags.append("oops")
    [listed] = await store.list_tasks(TaskFilter(), None, 10)
    assert listed.tags == []
    [claimed] = await store.claim_due(T0, 10, "r")
    assert isinstance(claimed.task.target.body, dict)
    claimed.task.target.body["k"] = []
    assert (await store.get_task(task.id)).target.body == {"k": [1]}


async def test_concurrent_claimers_never_share_an_occurrence() -> None:
    store = InMemoryTaskStore()
    tasks = [
        make_task(EVERY_SECOND, target=target(), max_running_instances=1000) for _ in range(50)
    ]
    for task in tasks:
        await store.create_task(task)
    seen: list[tuple[object, datetime]] = []
    for second in range(10):
        now = T0 + timedelta(seconds=second)
        batches = await asyncio.gather(*(store.claim_due(now, 7, f"r{i}") for i in range(3)))
        while any(len(batch) == 7 for batch in batches):
            seen += [(c.task.id, c.run.scheduled_for) for b in batches for c in b]
            batches = await asyncio.gather(*(store.claim_due(now, 7, f"r{i}") for i in range(3)))
        seen += [(c.task.id, c.run.scheduled_for) for b in batches for c in b]
    assert len(seen) == len(set(seen)) == 50 * 10


async def test_a_closed_waker_is_not_woken_until_started_again() -> None:
    store = InMemoryTaskStore()
    waker = store.new_waker()
    await waker.close()
    await store.create_task(make_task(EVERY_SECOND, target=target()))
    waiting = asyncio.create_task(waker.wait())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    await waker.start()
    await waker.notify()
    await asyncio.wait_for(waiting, 1)


async def test_noop_executor_succeeds_and_renders_without_io() -> None:
    clock = FakeClock(T0)
    executor = NoopExecutor(clock)
    task = make_task(EVERY_SECOND, target=target()).model_copy(
        update={"target": HttpTarget(url="http://x.test/", auth=BearerAuth(token_env="NOPE"))}
    )
    run = Run(
        id=uuid4(),
        task_id=task.id,
        scheduled_for=T0,
        claimed_at=T0,
        status=RunStatus.RUNNING,
        replica="r",
    )
    outcome = await executor.execute(task, run, None)
    assert (outcome.status, outcome.attempts, outcome.finished_at) == (RunStatus.SUCCEEDED, 1, T0)
    request = await executor.render(task, run, None, redact=True)
    assert request.headers["Authorization"] == "***"
    assert request.headers["Idempotency-Key"] == f"{task.id}:{int(T0.timestamp())}"
    assert request.headers["X-Scheduler-Scheduled-For"] == "2026-03-02T12:00:00Z"
    assert (request.method, request.url) == ("POST", "http://x.test/")


async def test_noop_executor_counts_its_attempt_before_its_cancel_point() -> None:
    executor = NoopExecutor(FakeClock(T0))
    task = make_task(EVERY_SECOND, target=target())
    run = Run(
        id=uuid4(),
        task_id=task.id,
        scheduled_for=T0,
        claimed_at=T0,
        status=RunStatus.RUNNING,
        replica="r",
    )
    progress = CallProgress()
    call = asyncio.create_task(executor.execute(task, run, None, progress))
    await asyncio.sleep(0)  # the call runs to its cancel point
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert (progress.attempts, progress.http_status, executor.executed) == (1, None, 0)
