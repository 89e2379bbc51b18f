"""The event sender: an outbox drained through the real HTTP executor to a
real local receiver, on a fake clock for the retry schedule; signatures verified with the
`standardwebhooks` package; metrics read from the Prometheus exposition."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from standardwebhooks.webhooks import Webhook

from adapters.clock import FakeClock
from adapters.http import HttpExecutor, HttpExecutorSettings
from adapters.http.signing import Signer, parse_signing_secrets
from adapters.memory.outbox import MemoryOutbox
from application.events import EventSender, SenderSettings
from domain.errors import StoreUnavailable
from domain.events import Destination, EventStatus, TaskRef, new_event
from domain.tasks import EventType
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually

SECRET = "whsec_" + base64.b64encode(b"event-signing-key-of-32-bytes!!!").decode()


@pytest.fixture
def clock() -> FakeClock:
    # Near the real time: a Standard Webhooks receiver refuses timestamps 5 min off.
    return FakeClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
async def executor() -> AsyncIterator[HttpExecutor]:
    executor = HttpExecutor(
        HttpExecutorSettings(signer=Signer(parse_signing_secrets(SECRET))),
        environ={"HOOK_TOKEN": "hook-t0ken", "HOOK_KEY": "hook-k3y"},
    )
    yield executor
    await executor.close()


def outbox_with(clock: FakeClock, url: str, count: int = 1, **where: object) -> MemoryOutbox:
    """An outbox holding `count` run.missed events due now, sent to `url`."""
    outbox = MemoryOutbox(asyncio.Lock())
    destination = Destination(url=url, **where)
    task = TaskRef(uuid4(), "nightly-report")
    outbox.add(
        new_event(EventType.RUN_MISSED, task, None, clock.now(), destination) for _ in range(count)
    )
    return outbox


async def test_an_event_is_posted_signed_with_its_id_and_body(
    clock: FakeClock, executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    outbox = outbox_with(clock, recording_target.url("/events"))
    sender = EventSender(outbox, executor, clock)

    assert await sender.send_due() == 1

    [received] = recording_target.received("/events")
    [event] = await outbox.list_events(EventStatus.SENT, None, 10)
    assert received.method == "POST"
    assert received.header("webhook-id") == str(event.id)
    body = Webhook(SECRET).verify(received.body, received.headers)
    assert body == event.payload
    assert body["type"] == "run.missed"
    assert body["data"]["event_id"] == str(event.id)
    assert body["data"]["run"] is None


async def test_an_unsigned_event_carries_its_webhook_id_all_the_same(
    clock: FakeClock, recording_target: RecordingTarget
) -> None:
    outbox = outbox_with(clock, recording_target.url("/events"))
    unsigned = HttpExecutor(HttpExecutorSettings(), clock=clock)
    try:
        assert await EventSender(outbox, unsigned, clock).send_due() == 1
    finally:
        await unsigned.close()

    [received] = recording_target.received("/events")
    [event] = await outbox.list_events(EventStatus.SENT, None, 10)
    assert received.header("webhook-id") == received.header("Idempotency-Key") == str(event.id)
    assert received.header("webhook-signature") is None
    assert [k for k in received.headers if k.lower() == "webhook-id"] == ["webhook-id"]


async def test_a_destination_sends_its_auth_and_secret_headers(
    clock: FakeClock, executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    outbox = outbox_with(
        clock,
        recording_target.url("/team"),
        auth={"type": "bearer", "token_env": "HOOK_TOKEN"},
        headers_env={"X-Hook-Key": "HOOK_KEY"},
    )

    await EventSender(outbox, executor, clock).send_due()

    [received] = recording_target.received("/team")
    assert received.header("Authorization") == "Bearer hook-t0ken"
    assert received.header("X-Hook-Key") == "hook-k3y"


async def test_a_failed_delivery_is_retried_with_the_same_webhook_id(
    clock: FakeClock, executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/events", Response(503), Response(500), Response(204))
    outbox = outbox_with(clock, recording_target.url("/events"))
    sender = EventSender(outbox, executor, clock)

    sent_at = []
    for wait in (0, 4, 1, 9, 1):  # due at 0, then 5 s and 10 s after each failure
        clock.advance(wait)
        if await sender.send_due():
            sent_at.append(clock.now())

    attempts = recording_target.received("/events")
    assert len(attempts) == 3
    assert sent_at[1] - sent_at[0] == timedelta(seconds=5)
    assert sent_at[2] - sent_at[1] == timedelta(seconds=10)
    assert len({a.header("webhook-id") for a in attempts}) == 1
    assert len({a.body for a in attempts}) == 1  # every attempt the same body
    for attempt in attempts:
        Webhook(SECRET).verify(attempt.body, attempt.headers)
    [event] = await outbox.list_events(None, None, 10)
    assert (event.status, event.attempts, event.http_status) == (EventStatus.SENT, 3, 204)


async def test_stop_lets_the_batch_in_flight_settle(
    clock: FakeClock, executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/events", Response(204, delay=0.3))
    outbox = outbox_with(clock, recording_target.url("/events"), 3)
    sender = EventSender(outbox, executor, clock, settings=SenderSettings(poll_interval=0.01))

    await sender.start()
    while not recording_target.received("/events"):
        await clock.sleep_until(clock.now())  # let the loop run
    await sender.stop()

    assert await outbox.count_events(EventStatus.SENT) == 3
    assert await outbox.count_events(EventStatus.PENDING) == 0


async def test_a_busy_engine_has_events_wait_at_most_the_busy_interval(
    clock: FakeClock, executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    outbox = outbox_with(clock, recording_target.url("/events"))
    looks = 0

    def busy() -> bool:  # the engine is behind all along
        nonlocal looks
        looks += 1
        return True

    settings = SenderSettings(poll_interval=0.01, busy_interval=5.0)
    sender = EventSender(outbox, executor, clock, settings=settings, busy=busy)

    async def sent() -> int:
        return await outbox.count_events(EventStatus.SENT)

    await sender.start()
    try:
        await eventually(sent, "the first event, claimed at the sender's first look")
        outbox.add(
            [
                new_event(
                    EventType.RUN_MISSED,
                    TaskRef(uuid4(), "t"),
                    None,
                    clock.now(),
                    Destination(url=recording_target.url("/events")),
                )
            ]
        )
        seen = looks

        async def looked_again() -> bool:
            return looks >= seen + 3

        await eventually(looked_again, "the sender to look at the engine again")
        assert await sent() == 1  # the second waits while the engine is busy …
        clock.advance(5)

        async def both_sent() -> bool:
            return await sent() == 2

        await eventually(both_sent, "the second event, once the busy interval passed")
    finally:
        await sender.stop()
    assert len(recording_target.received("/events")) == 2


async def test_an_unreachable_store_is_one_warning_line_and_a_retry(
    clock: FakeClock,
    executor: HttpExecutor,
    recording_target: RecordingTarget,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A database outage is expected: said as the engine says it, no traceback per poll.
    outbox = outbox_with(clock, recording_target.url("/events"))

    async def unreachable(*args: object, **kwargs: object) -> object:
        raise StoreUnavailable("the database is unavailable")

    outbox.claim_events = unreachable  # type: ignore[method-assign,assignment]
    sender = EventSender(outbox, executor, clock, settings=SenderSettings(poll_interval=0.01))

    await sender.start()
    await eventually(_async(lambda: "store unavailable; retrying" in caplog.text), "the warning")
    await sender.stop()

    records = [r for r in caplog.records if r.name == "scheduler.events"]
    assert records and all(r.levelname == "WARNING" for r in records)
    assert all(r.exc_info is None for r in records)


def _async(probe: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def probed() -> bool:
        return probe()

    return probed
