"""The outbox contract, on every store (memory, PostgreSQL): each change that raises an
event writes it with the change, in its transaction (docs/events.md, "When events are
written"); the outbox hands each attempt to one replica, retries on the domain's
schedule and drops an event past its deadline.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from application.ports import EventPageKey, EventStore, TaskStore
from domain.claims import scheduled
from domain.events import CLAIM_LEASE, DELIVERY_WINDOW, Delivery, Event, EventStatus, Outgoing
from domain.runs import RunOutcome, RunStatus
from domain.tasks import EventType, Notify
from domain.triggers import IntervalTrigger
from tests.adapters.contract_support import (
    MINUTE,
    REPLICA,
    SECOND,
    T0,
    claim_one,
    failed,
    succeeded,
)
from tests.fixtures.backends import Backend
from tests.fixtures.runs import finish_one
from tests.fixtures.tasks import make_task

HOOK = "http://127.0.0.1:9/events"
EVERY = Notify(url=HOOK)


def outbox(store: TaskStore) -> EventStore:
    found: EventStore = store.outbox  # type: ignore[attr-defined]
    return found


@pytest.fixture
async def store(backend: Backend) -> TaskStore:
    return await backend.new_store()


async def events_of(store: TaskStore) -> list[Event]:
    """Every event, oldest first."""
    return list(reversed(await outbox(store).list_events(None, None, 1000)))


async def types_of(store: TaskStore) -> list[str]:
    return [event.type.value for event in await events_of(store)]


def notified(**fields: Any) -> Any:
    fields.setdefault("notify", EVERY)
    return make_task(IntervalTrigger(every=60, anchor=T0), **fields)


# -- which change writes which event ---------------------------------------------------


async def test_a_missed_claim_writes_run_missed_with_the_run(store: TaskStore) -> None:
    task = await store.create_task(notified(misfire_grace_seconds=5))
    run = await claim_one(store, T0 + 30 * SECOND)
    assert run.status is RunStatus.MISSED

    [event] = await events_of(store)
    assert event.type is EventType.RUN_MISSED
    assert (event.task_id, event.task_name, event.run_id) == (task.id, task.name, run.id)
    assert event.status is EventStatus.PENDING
    assert event.destination.url == HOOK
    assert event.payload["data"]["run"]["status"] == "missed"  # type: ignore[index, call-overload]


async def test_a_claim_at_the_limit_writes_run_skipped(store: TaskStore) -> None:
    task = await store.create_task(notified())
    first = await claim_one(store, T0)
    assert first.status is RunStatus.RUNNING
    assert await events_of(store) == []  # a run that is called raises nothing yet

    skipped = await store.start_manual_run(task.id, T0 + SECOND, REPLICA)
    assert skipped.run.status is RunStatus.SKIPPED
    assert await types_of(store) == ["run.skipped"]


async def test_outcomes_write_failed_auto_paused_and_recovered(store: TaskStore) -> None:
    task = await store.create_task(notified(pause_after_failures=2))
    run = await claim_one(store, T0)
    await finish_one(store, run.id, succeeded(T0))
    assert await events_of(store) == []  # a success after a success tells nothing

    run = await claim_one(store, T0 + MINUTE)
    await finish_one(store, run.id, failed(T0 + MINUTE))
    run = await claim_one(store, T0 + 2 * MINUTE)
    await finish_one(store, run.id, succeeded(T0 + 2 * MINUTE))
    assert await types_of(store) == ["run.failed", "task.recovered"]

    for minute in (3, 4):
        run = await claim_one(store, T0 + minute * MINUTE)
        await finish_one(store, run.id, failed(T0 + minute * MINUTE))
    assert (await store.get_task(task.id)).enabled is False
    # The last failure raises two events at one instant (listed in id order).
    assert sorted((await types_of(store))[2:]) == ["run.failed", "run.failed", "task.auto_paused"]
    [paused] = [e for e in await events_of(store) if e.type is EventType.TASK_AUTO_PAUSED]
    assert paused.run_id == run.id


async def test_the_first_success_after_an_automatic_pause_and_a_resume_is_a_recovery(
    store: TaskStore,
) -> None:
    task = await store.create_task(notified(pause_after_failures=1))
    run = await claim_one(store, T0)
    await finish_one(store, run.id, failed(T0))
    paused = await store.get_task(task.id)
    assert (paused.enabled, paused.consecutive_failures) == (False, 1)
    # Resumed as the API resumes (docs/api.md: the failures count starts again at 0).
    resumed = scheduled(
        paused.model_copy(update={"enabled": True, "consecutive_failures": 0}), T0 + MINUTE
    )
    await store.update_task(resumed, paused.version, reschedule=True)
    assert (await store.get_task(task.id)).consecutive_failures == 0

    run = await claim_one(store, T0 + MINUTE)
    await finish_one(store, run.id, succeeded(T0 + MINUTE))
    run = await claim_one(store, T0 + 2 * MINUTE)
    await finish_one(store, run.id, succeeded(T0 + 2 * MINUTE))  # a success after one: nothing
    # The failure's two events share an instant (listed in id order).
    *failure, recovery = await types_of(store)
    assert (sorted(failure), recovery) == (["run.failed", "task.auto_paused"], "task.recovered")
    [recovered] = [e for e in await events_of(store) if e.type is EventType.TASK_RECOVERED]
    assert recovered.run_id is not None and recovered.run_id != run.id


async def test_a_batch_of_outcomes_counts_events_in_its_order(store: TaskStore) -> None:
    task = await store.create_task(notified(max_running_instances=3, pause_after_failures=2))
    runs = [(await store.start_manual_run(task.id, T0, REPLICA)).run for _ in range(2)]
    # Manual runs do not count on the task: two failures pause nothing.
    await store.finish_runs([(r.id, failed(T0)) for r in runs])
    assert await types_of(store) == ["run.failed", "run.failed"]


async def test_a_lost_run_writes_run_failed(store: TaskStore) -> None:
    await store.create_task(notified())
    run = await claim_one(store, T0)
    assert run.lease_expires_at is not None
    [lost] = await store.expire_lost_runs(run.lease_expires_at + SECOND)

    [event] = await events_of(store)
    assert (event.type, event.run_id) == (EventType.RUN_FAILED, lost.id)
    assert event.payload["data"]["run"]["error"] == lost.error  # type: ignore[index, call-overload]


async def test_notify_events_choose_what_is_written(store: TaskStore) -> None:
    only_paused = Notify(url=HOOK, events=[EventType.TASK_AUTO_PAUSED])
    await store.create_task(
        make_task(IntervalTrigger(every=60, anchor=T0), notify=only_paused, pause_after_failures=1)
    )
    quiet = await store.create_task(make_task(IntervalTrigger(every=60, anchor=T0)))
    for claimed in await store.claim_due(T0, 10, REPLICA):
        await finish_one(store, claimed.run.id, failed(T0))

    [event] = await events_of(store)
    assert event.type is EventType.TASK_AUTO_PAUSED
    # Without notify (and without SCHEDULER_EVENTS_URL) a task raises nothing.
    assert event.task_id != quiet.id


async def test_a_refused_batch_writes_no_outcome_and_no_event(store: TaskStore) -> None:
    await store.create_task(notified())
    run = await claim_one(store, T0)
    running = RunOutcome(status=RunStatus.RUNNING, attempts=1, finished_at=T0)
    with pytest.raises(ValueError):
        await store.finish_runs([(run.id, failed(T0)), (run.id, running)])
    assert (await store.get_run(run.id)).status is RunStatus.RUNNING
    assert await events_of(store) == []


# -- delivery: claims, retries, the deadline ---------------------------------------------


async def pending_events(store: TaskStore, count: int) -> list[Event]:
    """`count` run.missed events, due at T0 + 30 s."""
    for _ in range(count):
        await store.create_task(notified(misfire_grace_seconds=5))
    await store.claim_due(T0 + 30 * SECOND, 1000, REPLICA)
    events = await events_of(store)
    assert len(events) == count
    return events


async def test_two_replicas_never_take_the_same_attempt(backend: Backend) -> None:
    stores = [await backend.new_store() for _ in range(3)]
    await pending_events(stores[0], 30)
    now = T0 + MINUTE

    async def drain(store: TaskStore) -> list[Outgoing]:
        taken: list[Outgoing] = []
        while batch := await outbox(store).claim_events(now, 4):
            taken += batch
        return taken

    batches = await asyncio.gather(*(drain(store) for store in stores))
    ids = [event.id for batch in batches for event in batch]
    assert len(ids) == len(set(ids)) == 30
    assert all(event.attempts == 1 for batch in batches for event in batch)


async def test_a_claim_skips_the_destinations_it_is_told_to(store: TaskStore) -> None:
    slow, fast = "http://127.0.0.1:9/slow", "http://127.0.0.1:9/fast"
    for url in (slow, slow, fast):
        await store.create_task(notified(notify=Notify(url=url), misfire_grace_seconds=5))
    await store.claim_due(T0 + 30 * SECOND, 1000, REPLICA)
    box, now = outbox(store), T0 + MINUTE

    [taken] = await box.claim_events(now, 10, skip={slow})
    assert taken.destination.url == fast and taken.attempts == 1
    assert await box.claim_events(now, 10, skip=[slow, fast]) == []
    # Skipped events stay due, untouched: the next claim without the skip takes them.
    later = await box.claim_events(now, 10)
    assert [(e.destination.url, e.attempts) for e in later] == [(slow, 1), (slow, 1)]


async def test_a_failed_attempt_is_retried_on_the_doubling_schedule(store: TaskStore) -> None:
    [event] = await pending_events(store, 1)
    box, now = outbox(store), T0 + MINUTE
    waits = []
    for attempt in range(1, 5):
        [taken] = await box.claim_events(now, 10)
        assert taken.attempts == attempt
        assert await box.claim_events(now, 10) == []  # held by this claim
        [settled] = await box.record_deliveries(
            [(event.id, attempt, Delivery(delivered=False, http_status=503, error="HTTP 503"))],
            now,
        )
        assert settled.status is EventStatus.PENDING and settled.last_error == "HTTP 503"
        assert settled.next_attempt_at is not None
        waits.append(settled.next_attempt_at - now)
        assert await box.claim_events(settled.next_attempt_at - SECOND, 10) == []
        now = settled.next_attempt_at
    assert waits == [timedelta(seconds=s) for s in (5, 10, 20, 40)]

    [taken] = await box.claim_events(now, 10)
    [sent] = await box.record_deliveries(
        [(event.id, 5, Delivery(delivered=True, http_status=204))], now
    )
    assert (sent.status, sent.http_status, sent.finished_at) == (EventStatus.SENT, 204, now)
    assert await box.count_events(EventStatus.SENT) == 1
    assert await box.count_events(EventStatus.PENDING) == 0


async def test_a_lapsed_claim_is_taken_over_and_the_first_loses_its_say(
    store: TaskStore,
) -> None:
    [event] = await pending_events(store, 1)
    box, now = outbox(store), T0 + MINUTE
    [first] = await box.claim_events(now, 10)
    # The replica that claimed it died: past the lease, another takes it.
    [second] = await box.claim_events(now + CLAIM_LEASE, 10)
    assert second.attempts == first.attempts + 1
    assert await box.record_deliveries([(event.id, first.attempts, Delivery(True))], now) == []
    [sent] = await box.record_deliveries([(event.id, second.attempts, Delivery(True))], now)
    assert sent.status is EventStatus.SENT


async def test_an_event_past_its_deadline_is_dropped(store: TaskStore) -> None:
    [event] = await pending_events(store, 1)
    box = outbox(store)
    late = event.deadline - SECOND
    [taken] = await box.claim_events(late, 10)
    [dropped] = await box.record_deliveries(
        [(event.id, taken.attempts, Delivery(delivered=False, error="refused"))], late
    )
    assert dropped.status is EventStatus.DROPPED and dropped.next_attempt_at is None
    assert dropped.deadline - dropped.created_at == DELIVERY_WINDOW
    assert await box.claim_events(event.deadline + MINUTE, 10) == []
    assert [e.id for e in await box.list_events(EventStatus.DROPPED, None, 10)] == [event.id]


async def test_a_claim_that_lapses_past_the_deadline_drops_the_event(store: TaskStore) -> None:
    [event] = await pending_events(store, 1)
    box = outbox(store)
    await box.claim_events(event.deadline - SECOND, 10)
    [dropped] = await box.claim_events(event.deadline + CLAIM_LEASE, 10)
    assert dropped.status is EventStatus.DROPPED
    assert await box.count_events(EventStatus.DROPPED) == 1


async def test_listing_pages_newest_first_and_retention_deletes_settled(
    store: TaskStore,
) -> None:
    events = await pending_events(store, 5)
    box = outbox(store)
    newest_first = sorted(events, key=lambda e: (e.created_at, e.id), reverse=True)
    first = await box.list_events(EventStatus.PENDING, None, 3)
    assert [e.id for e in first] == [e.id for e in newest_first[:3]]
    rest = await box.list_events(
        EventStatus.PENDING, EventPageKey(first[-1].created_at, first[-1].id), 10
    )
    assert [e.id for e in rest] == [e.id for e in newest_first[3:]]

    now = T0 + MINUTE
    taken = await box.claim_events(now, 2)
    await box.record_deliveries([(e.id, e.attempts, Delivery(True)) for e in taken], now)
    assert await box.delete_events_before(now, 10) == 0  # finished at now, not before
    assert await box.delete_events_before(now + SECOND, 1) == 1
    assert await box.delete_events_before(now + SECOND, 10) == 1
    assert await box.count_events(EventStatus.PENDING) == 3  # pending ones stay
