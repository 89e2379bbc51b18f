"""The store contract for `backfill.finished` (docs/events.md), on every store: written
once, in the transaction that ended a backfill's last run or cancelled it (its own
cancel, its task's pause or delete, a run's cancel), also when its last runs end at
once on several replicas."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any
from uuid import UUID

from application.ports import TaskDelete, TaskStore, TaskUpdate
from domain.backfills import Backfill
from domain.events import Event
from domain.overlap import CANCELLED_BY_PAUSE
from domain.runs import RunStatus
from domain.tasks import EventType, Task
from tests.adapters.contract_support import REPLICA, SECOND, failed, succeeded
from tests.adapters.contract_support import store as store  # the fixture
from tests.adapters.test_backfill_contract import NOW, PAST, backfill, backfills
from tests.adapters.test_events_contract import EVERY, HOOK, events_of
from tests.adapters.test_overlap_contract import add, claim_at
from tests.fixtures.backends import Backend


async def finished_events(store: TaskStore) -> list[Event]:
    return [e for e in await events_of(store) if e.type is EventType.BACKFILL_FINISHED]


def told(event: Event) -> Any:
    return event.payload["data"]["backfill"]  # type: ignore[index,call-overload]


async def notified(store: TaskStore, **fields: Any) -> Task:
    return await add(store, "skip", notify=EVERY, **fields)


async def end(store: TaskStore, run_id: UUID, seconds: int, ok: bool = True) -> list[UUID]:
    at = NOW + seconds * SECOND
    outcome = succeeded(at) if ok else failed(at)
    freed = await store.finish_runs_starting([(run_id, outcome)], at, REPLICA)
    return [claimed.run.id for claimed in freed.started]


async def test_the_last_run_ending_writes_it_once(store: TaskStore) -> None:
    task = await notified(store)
    made: Backfill = await backfill(store, task, PAST[:3])
    running = made.made[0].run.id
    (running,) = await end(store, running, 1)
    (running,) = await end(store, running, 2, ok=False)
    assert await finished_events(store) == []
    assert await end(store, running, 3) == []
    (event,) = await finished_events(store)
    assert (event.task_id, event.task_name, event.run_id) == (task.id, task.name, None)
    last = await store.get_run(running)
    assert event.created_at == last.finished_at  # when its last run ended
    assert event.payload["type"] == "backfill.finished"
    assert told(event) == {
        "id": str(made.backfill_id),
        "status": "finished",
        "runs": 3,
        "by_status": {"failed": 1, "succeeded": 2},
    }
    state = await backfills(store).get_backfill(made.backfill_id)
    assert (state.record.status, state.record.finished_at) == ("finished", last.finished_at)


async def test_a_cancel_writes_it_and_the_runs_ending_after_do_not(store: TaskStore) -> None:
    task = await notified(store)
    made = await backfill(store, task, PAST[:3])
    assert await backfills(store).cancel_backfill(made.backfill_id, NOW + SECOND) == 3
    (event,) = await finished_events(store)
    assert told(event) == {
        "id": str(made.backfill_id),
        "status": "cancelled",
        "runs": 3,
        "by_status": {"cancelled": 2, "running": 1},
    }
    await end(store, made.made[0].run.id, 2)
    assert len(await finished_events(store)) == 1


async def test_a_backfill_that_made_no_runs_is_finished_at_once(store: TaskStore) -> None:
    task = await notified(store)
    made = await backfill(store, task, [])
    (event,) = await finished_events(store)
    assert told(event)["runs"] == 0 and told(event)["id"] == str(made.backfill_id)
    await backfills(store).cancel_backfill(made.backfill_id, NOW + SECOND)
    assert len(await finished_events(store)) == 1


async def test_no_event_while_a_run_still_waits_nor_for_a_task_without_notify(
    store: TaskStore,
) -> None:
    quiet = await add(store, "skip")
    await claim_at(store, 99)
    made = await backfill(store, quiet, PAST[:1], only_missing=False)
    assert await finished_events(store) == []
    await backfills(store).cancel_backfill(made.backfill_id, NOW + SECOND)
    assert await finished_events(store) == []  # its task asked for no events


async def test_last_runs_ending_on_three_replicas_write_it_once(backend: Backend) -> None:
    stores = [await backend.new_store() for _ in range(3)]
    task = await notified(stores[0])
    made = await backfill(stores[0], task, PAST[:3], overlap="allow_all")
    at = NOW + SECOND
    await asyncio.gather(
        *(
            s.finish_runs_starting([(c.run.id, succeeded(at))], at, f"replica-{i}")
            for i, (s, c) in enumerate(zip(stores, made.made, strict=True))
        )
    )
    (event,) = await finished_events(stores[0])
    assert told(event)["by_status"] == {"succeeded": 3}


# -- the task's pause, its delete, a run's cancel: their cancel may end a backfill -----


async def waiting_backfill(store: TaskStore, task: Task) -> Backfill:
    """A backfill of three occurrences all queued behind a claimed run of the task."""
    made = await backfill(store, task, PAST[:3], only_missing=False)
    assert {c.run.status for c in made.made} == {RunStatus.QUEUED}
    return made


def pausing(task: Task, at: datetime) -> Task:
    return task.model_copy(update={"enabled": False, "updated_at": at})


async def test_a_pause_that_cancels_its_queued_runs_writes_it(store: TaskStore) -> None:
    task = await notified(store)
    (claimed,) = await claim_at(store, 99)
    made = await waiting_backfill(store, task)
    later = NOW + SECOND
    await store.update_task(pausing(task, later), task.version, reschedule=True)
    (event,) = await finished_events(store)
    assert (event.task_id, event.run_id, event.destination.url) == (task.id, None, HOOK)
    assert event.created_at == later
    assert told(event) == {
        "id": str(made.backfill_id),
        "status": "finished",
        "runs": 3,
        "by_status": {"cancelled": 3},
    }
    # The record says what GET /backfills/{id} says: finished, when the pause was.
    state = await backfills(store).get_backfill(made.backfill_id)
    assert (state.record.status, state.record.finished_at, state.status) == (
        "finished",
        later,
        "finished",
    )
    # Neither the task's run ending nor the backfill's cancel tells it again.
    await end(store, claimed.run.id, 2)
    await backfills(store).cancel_backfill(made.backfill_id, NOW + 3 * SECOND)
    assert len(await finished_events(store)) == 1


async def test_a_pause_leaves_it_to_a_run_of_the_backfill_still_running(
    store: TaskStore,
) -> None:
    task = await notified(store)
    made = await backfill(store, task, PAST[:3], only_missing=False)
    running, *queued = [c.run for c in made.made]
    assert [r.status for r in queued] == [RunStatus.QUEUED] * 2
    await store.update_task(pausing(task, NOW + SECOND), task.version, reschedule=True)
    assert await finished_events(store) == []  # a run of it still runs
    await end(store, running.id, 2)
    (event,) = await finished_events(store)
    assert told(event)["by_status"] == {"cancelled": 2, "succeeded": 1}
    assert event.created_at == (await store.get_run(running.id)).finished_at


async def test_an_automatic_pause_writes_it(store: TaskStore) -> None:
    task = await notified(store, pause_after_failures=1)
    (claimed,) = await claim_at(store, 99)
    made = await waiting_backfill(store, task)
    await end(store, claimed.run.id, 1, ok=False)
    assert not (await store.get_task(task.id)).enabled
    (event,) = await finished_events(store)
    assert told(event)["id"] == str(made.backfill_id)
    assert told(event)["by_status"] == {"cancelled": 3}


async def test_an_automatic_pause_starting_nothing_writes_it(store: TaskStore) -> None:
    """An engine that is stopping records outcomes without starting queued runs: the
    pause still empties the queue, at the instant of the failure that paused it."""
    task = await notified(store, pause_after_failures=1)
    (claimed,) = await claim_at(store, 99)
    made = await waiting_backfill(store, task)
    at = NOW + SECOND
    await store.finish_runs([(claimed.run.id, failed(at))])
    assert not (await store.get_task(task.id)).enabled
    for waited in made.made:
        run = await store.get_run(waited.run.id)
        assert (run.status, run.error) == (RunStatus.CANCELLED, CANCELLED_BY_PAUSE)
    (event,) = await finished_events(store)
    assert told(event)["by_status"] == {"cancelled": 3}
    assert event.created_at == (await store.get_run(claimed.run.id)).finished_at


async def test_a_delete_writes_it_where_its_task_said(store: TaskStore) -> None:
    task = await notified(store)
    (claimed,) = await claim_at(store, 99)
    made = await waiting_backfill(store, task)
    await store.delete_task(task.id, at=NOW + SECOND)
    (event,) = await finished_events(store)
    assert (event.task_id, event.task_name, event.destination.url) == (task.id, task.name, HOOK)
    assert told(event)["by_status"] == {"cancelled": 3}
    assert (await backfills(store).get_backfill(made.backfill_id)).record.status == "finished"
    await end(store, claimed.run.id, 2)
    assert len(await finished_events(store)) == 1


async def test_a_deleted_task_s_backfill_ending_later_writes_none(store: TaskStore) -> None:
    task = await notified(store)
    made = await backfill(store, task, PAST[:2], only_missing=False)
    await store.delete_task(task.id, at=NOW + SECOND)
    assert await finished_events(store) == []  # its first run still runs
    await end(store, made.made[0].run.id, 2)
    # Ended, but its task and the destination it named are gone: no event.
    assert await finished_events(store) == []
    state = await backfills(store).get_backfill(made.backfill_id)
    assert (state.record.status, state.status) == ("finished", "finished")


async def test_an_apply_that_pauses_one_task_and_deletes_another_writes_both(
    store: TaskStore,
) -> None:
    paused, deleted = await notified(store), await notified(store)
    await claim_at(store, 99)
    made = [await waiting_backfill(store, task) for task in (paused, deleted)]
    later = NOW + SECOND
    update = TaskUpdate(pausing(paused, later), paused.version, True)
    gone = TaskDelete(deleted.id, (await store.get_task(deleted.id)).version)
    await store.apply_tasks([], [update], [gone], at=later)
    events = await finished_events(store)
    assert sorted(told(e)["id"] for e in events) == sorted(str(m.backfill_id) for m in made)
    assert {e.task_id for e in events} == {paused.id, deleted.id}


async def test_cancelling_its_last_queued_run_writes_it(store: TaskStore) -> None:
    task = await notified(store)
    await claim_at(store, 99)
    made = await backfill(store, task, PAST[:1], only_missing=False)
    await store.request_cancel(made.made[0].run.id)
    (event,) = await finished_events(store)
    assert told(event)["by_status"] == {"cancelled": 1}


async def test_a_claim_replacing_its_last_queued_run_writes_it(store: TaskStore) -> None:
    task = await add(store, "replace", notify=EVERY)
    await claim_at(store, 99)
    made = await backfill(store, task, PAST[:1], only_missing=False)
    await claim_at(store, 100)  # asks the running run to stop, and queues
    assert await finished_events(store) == []
    await claim_at(store, 101)  # every run in flight is stopping: the oldest queued goes
    assert (await store.get_run(made.made[0].run.id)).status is RunStatus.CANCELLED
    (event,) = await finished_events(store)
    assert told(event)["by_status"] == {"cancelled": 1}
