"""The event sender beside a destination that hangs: a real local receiver that holds
one path's answers (past the attempt's 10 s) and answers another's at once, the
in-memory outbox, a fake clock for the retry schedule. The sender keeps claiming while
attempts are in flight, so the hanging destination delays no one else's events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest

from adapters.clock import FakeClock
from adapters.http import HttpExecutor, HttpExecutorSettings
from adapters.memory.outbox import MemoryOutbox
from application.events import EventSender, SenderSettings
from domain.events import Destination, Event, EventStatus, TaskRef, new_event
from domain.tasks import EventType
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually

HANG = Response(204, delay=60)  # longer than an attempt may take: released at the end
# How long a fast event may take here: well under the 10 s a hanging attempt lasts
# (the sender that waited for its whole batch took that long).
PROMPTLY = 5.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
async def executor() -> AsyncIterator[HttpExecutor]:
    executor = HttpExecutor(HttpExecutorSettings())
    yield executor
    await executor.close()


def add(outbox: MemoryOutbox, url: str, at: datetime) -> UUID:
    """A run.failed event to `url`, written (and due) at `at`; its id."""
    event = new_event(EventType.RUN_FAILED, TaskRef(uuid4(), "t"), None, at, Destination(url=url))
    outbox.add([event])
    return event.id


async def event_of(outbox: MemoryOutbox, event_id: UUID) -> Event:
    [event] = [e for e in await outbox.list_events(None, None, 1000) if e.id == event_id]
    return event


def sent(outbox: MemoryOutbox, event_id: UUID) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return (await event_of(outbox, event_id)).status is EventStatus.SENT

    return probe


def started(target: RecordingTarget, path: str) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return bool(target.received(path))

    return probe


async def test_a_hanging_destination_does_not_delay_another(
    clock: FakeClock, executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/slow", HANG)
    outbox = MemoryOutbox(asyncio.Lock())
    slow = add(outbox, recording_target.url("/slow"), clock.now())
    sender = EventSender(outbox, executor, clock, settings=SenderSettings(poll_interval=0.01))
    await sender.start()
    try:
        await eventually(started(recording_target, "/slow"), "the slow attempt")
        fast = add(outbox, recording_target.url("/fast"), clock.now())

        await eventually(sent(outbox, fast), "the fast event", within=PROMPTLY)
        held = await event_of(outbox, slow)
        assert (held.status, held.attempts, held.http_status) == (EventStatus.PENDING, 1, None)
        # The sender claimed again and again meanwhile; the event in flight stayed its own.
        assert len(recording_target.received("/slow")) == 1
    finally:
        recording_target.release()
        await sender.stop()
    assert await outbox.count_events(EventStatus.SENT) == 2


async def test_retries_keep_their_schedule_beside_a_hanging_destination(
    clock: FakeClock, executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/slow", HANG)
    recording_target.respond("/flaky", Response(503), Response(503), Response(204))
    outbox = MemoryOutbox(asyncio.Lock())
    add(outbox, recording_target.url("/slow"), clock.now())
    flaky = add(outbox, recording_target.url("/flaky"), clock.now())
    sender = EventSender(outbox, executor, clock, settings=SenderSettings(poll_interval=0.01))
    await sender.start()
    try:
        for attempt, wait in ((1, 5), (2, 10)):
            due = clock.now() + timedelta(seconds=wait)

            async def settled(attempt: int = attempt, due: datetime = due) -> bool:
                event = await event_of(outbox, flaky)
                return event.attempts == attempt and event.next_attempt_at == due

            # Settled when its own attempt ended, not when the hanging one did.
            await eventually(settled, f"attempt {attempt} retried {wait} s on", within=PROMPTLY)
            clock.advance(wait)
        await eventually(sent(outbox, flaky), "the third attempt", within=PROMPTLY)
        assert len(recording_target.received("/flaky")) == 3
        assert len(recording_target.received("/slow")) == 1
    finally:
        recording_target.release()
        await sender.stop()


async def test_a_destination_holds_at_most_its_share_of_attempts(
    clock: FakeClock, executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/dead", HANG)
    outbox = MemoryOutbox(asyncio.Lock())
    # The dead destination's events are due first: a claim in due order meets them first.
    dead = [add(outbox, recording_target.url("/dead"), clock.now() - timedelta(seconds=1))]
    dead += [add(outbox, recording_target.url("/dead"), clock.now()) for _ in range(4)]
    fast = add(outbox, recording_target.url("/fast"), clock.now() + timedelta(seconds=1))
    clock.advance(1)
    settings = SenderSettings(poll_interval=0.01, per_destination=2, capacity=6, batch_size=10)
    sender = EventSender(outbox, executor, clock, settings=settings)
    await sender.start()
    try:
        await eventually(sent(outbox, fast), "the fast event", within=PROMPTLY)
        # Two in flight, two claimed to start as those end, the last left in the
        # outbox, untried: no claimed event waits behind more than one round.
        assert len(recording_target.received("/dead")) == 2
        attempts = sorted([(await event_of(outbox, e)).attempts for e in dead])
        assert attempts == [0, 1, 1, 1, 1]
    finally:
        recording_target.release()
        await sender.stop()
