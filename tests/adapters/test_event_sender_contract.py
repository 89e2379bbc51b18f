"""The event sender on every store (memory, PostgreSQL), as the audit drove it: one
task's receiver hangs, another's answers; the answering one gets its event, and its
retry, on time while the hanging attempt is still in flight (docs/events.md, "A slow
receiver delays only its own events"). A real local receiver, a fake clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from uuid import UUID

import pytest

from adapters.clock import FakeClock
from adapters.http import HttpExecutor, HttpExecutorSettings
from application.events import EventSender, SenderSettings
from application.ports import EventStore, TaskStore
from domain.events import Event
from domain.tasks import Notify
from domain.triggers import IntervalTrigger
from tests.adapters.contract_support import MINUTE, REPLICA, SECOND, T0
from tests.fixtures.backends import Backend
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually

# Well under the 10 s the hanging attempt lasts: what the fast receiver's event may take.
PROMPTLY = 5.0


@pytest.fixture
async def executor() -> AsyncIterator[HttpExecutor]:
    executor = HttpExecutor(HttpExecutorSettings())
    yield executor
    await executor.close()


def outbox(store: TaskStore) -> EventStore:
    found: EventStore = store.outbox  # type: ignore[attr-defined]
    return found


async def missed_event(store: TaskStore, url: str) -> UUID:
    """A task notifying `url`, whose occurrence at T0 is claimed missed: its event's id."""
    task = make_task(
        IntervalTrigger(every=3600, anchor=T0), notify=Notify(url=url), misfire_grace_seconds=5
    )
    await store.create_task(task)
    await store.claim_due(T0 + 30 * SECOND, 1000, REPLICA)
    [event] = [e for e in await outbox(store).list_events(None, None, 100) if e.task_id == task.id]
    return event.id


async def event_of(store: TaskStore, event_id: UUID) -> Event:
    [event] = [e for e in await outbox(store).list_events(None, None, 100) if e.id == event_id]
    return event


async def test_a_hanging_receiver_delays_neither_another_event_nor_its_retry(
    backend: Backend, executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/slow", Response(204, delay=60))  # released at the end
    recording_target.respond("/fast", Response(503), Response(204))
    store = await backend.new_store()
    clock = FakeClock(T0 + MINUTE)
    slow = [await missed_event(store, recording_target.url("/slow")) for _ in range(3)]
    # One attempt per URL at once and one more in hand: the hanging URL is soon full,
    # and every later claim on this store leaves it out.
    settings = SenderSettings(poll_interval=0.01, per_destination=1)
    sender = EventSender(outbox(store), executor, clock, settings=settings)
    await sender.start()
    try:

        async def slow_started() -> bool:
            return bool(recording_target.received("/slow"))

        await eventually(slow_started, "the slow attempt")
        fast = await missed_event(store, recording_target.url("/fast"))

        async def failed_once() -> bool:
            event = await event_of(store, fast)
            return event.http_status == 503 and event.attempts == 1

        await eventually(failed_once, "the fast receiver's first answer, settled", within=PROMPTLY)
        assert (await event_of(store, fast)).next_attempt_at == clock.now() + 5 * SECOND
        clock.advance(timedelta(seconds=5))

        async def sent() -> bool:
            return (await event_of(store, fast)).http_status == 204

        await eventually(sent, "the retry, 5 s on", within=PROMPTLY)
        held = [await event_of(store, e) for e in slow]
        assert sorted(e.attempts for e in held) == [0, 1, 1]
        assert {(e.http_status, e.finished_at) for e in held} == {(None, None)}
        assert len(recording_target.received("/slow")) == 1
    finally:
        recording_target.release()
        await sender.stop()
