"""The store contract for `backfill.finished` (docs/events.md), on every store: written
once, in the transaction that ended a backfill's last run or cancelled it, also when
its last runs end at once on several replicas."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

from application.ports import TaskStore
from domain.backfills import Backfill
from domain.events import Event
from domain.tasks import EventType, Task
from tests.adapters.test_backfill_contract import NOW, PAST, backfill, backfills
from tests.adapters.test_events_contract import EVERY, events_of
from tests.adapters.test_overlap_contract import add, claim_at
from tests.adapters.test_task_store_contract import REPLICA, SECOND, failed, succeeded
from tests.adapters.test_task_store_contract import store as store  # the fixture
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
