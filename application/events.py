"""The event sender: drains the outbox of this store, on every replica that runs an
engine. Each batch is claimed by one replica (the store's claim), sent concurrently,
and settled in one write; the retry schedule and the drop are the domain's.

Events come second to runs: while the local engine is busy (a burst: more runs due
than it has started), the sender claims a small batch (`SenderSettings.busy_batch_size`)
once every `busy_interval`, so that the burst has the core nearly to itself and events
still move; once the engine has caught up, full batches again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

from application.bounds import check_limit
from application.pagination import Page, instant_key, page_of, read_cursor, read_instant_key
from application.ports import Clock, EventPageKey, EventStore
from domain.events import Delivery, Event, EventStatus, Outgoing, Progress

log = logging.getLogger("scheduler.events")

# How often a yielding sender looks again whether the engine is still busy (seconds).
_YIELD_POLL = 0.1


class EventDelivery(Protocol):
    async def deliver(self, event: Outgoing) -> Delivery: ...


class EventObserver(Protocol):
    """Hooks the sender calls, for metrics; each returns at once and never raises."""

    def event_settled(self, event: Progress) -> None:
        """An attempt ended: `event` is now SENT, PENDING (to be retried) or DROPPED."""
        ...

    def events_pending(self, n: int) -> None: ...


class NoEventObserver:
    def event_settled(self, event: Progress) -> None:
        return None

    def events_pending(self, n: int) -> None:
        return None


@dataclass(frozen=True, slots=True)
class SenderSettings:
    batch_size: int = 500
    poll_interval: float = 1.0  # seconds between looks at an outbox with nothing due
    retention: timedelta = timedelta(days=30)  # sent and dropped events are kept this long
    retention_sweep_interval: timedelta = timedelta(minutes=10)
    retention_batch_size: int = 1000
    # While the engine is busy, a batch of at most `busy_batch_size` this often
    # (seconds): events are never starved, and the burst keeps the core
    # (docs/operations.md, "Events").
    busy_interval: float = 5.0
    busy_batch_size: int = 50


class EventSender:
    def __init__(
        self,
        store: EventStore,
        delivery: EventDelivery,
        clock: Clock,
        observer: EventObserver | None = None,
        settings: SenderSettings | None = None,
        busy: Callable[[], bool] | None = None,
    ) -> None:
        """`busy` says whether the local engine is saturated (its runs in flight at
        its ceiling); None: never."""
        self._store = store
        self._busy = busy
        self._delivery = delivery
        self._clock = clock
        self._observer = observer or NoEventObserver()
        self.settings = settings or SenderSettings()
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._next_sweep: datetime | None = None
        self._last_claim: datetime | None = None

    def yielding(self) -> bool:
        """Whether to leave the core to the engine now: it is busy, and the last claim
        was less than `busy_interval` ago."""
        if self._busy is None or self._last_claim is None or not self._busy():
            return False
        since = (self._clock.now() - self._last_claim).total_seconds()
        return since < self.settings.busy_interval

    async def send_due(self, limit: int | None = None) -> int:
        """Claim one batch of due events (of `limit`, default the batch size), send it,
        settle it; how many were claimed."""
        self._last_claim = self._clock.now()
        limit = limit or self.settings.batch_size
        claimed = await self._store.claim_events(self._last_claim, limit)
        to_send = [event for event in claimed if event.status is EventStatus.PENDING]
        for event in claimed:
            if event.status is EventStatus.DROPPED:  # its claim lapsed past the deadline
                self._settled(event)
        if to_send:
            deliveries = await asyncio.gather(*(self._send(event) for event in to_send))
            results: Sequence[tuple[UUID, int, Delivery]] = [
                (event.id, event.attempts, delivery)
                for event, delivery in zip(to_send, deliveries, strict=True)
            ]
            for settled in await self._store.record_deliveries(results, self._clock.now()):
                self._settled(settled)
        return len(claimed)

    async def sweep(self) -> int:
        """Delete sent and dropped events older than the retention; how many."""
        settings = self.settings
        cutoff = self._clock.now() - settings.retention
        deleted = 0
        while True:
            count = await self._store.delete_events_before(cutoff, settings.retention_batch_size)
            deleted += count
            if count < settings.retention_batch_size:
                return deleted

    async def start(self) -> None:
        if self._task is None:
            self._stopping.clear()
            self._task = asyncio.create_task(self._loop(), name="event-sender")

    async def stop(self) -> None:
        """Stop claiming; attempts in flight finish and are settled first."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping.set()
        await task

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            if self.yielding():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), _YIELD_POLL)
                continue
            claimed, limit = 0, self.settings.batch_size
            if self._busy is not None and self._busy():
                limit = self.settings.busy_batch_size
            try:
                claimed = await self.send_due(limit)
                self._observer.events_pending(await self._store.count_events(EventStatus.PENDING))
                now = self._clock.now()
                if self._next_sweep is None or now >= self._next_sweep:
                    self._next_sweep = now + self.settings.retention_sweep_interval
                    deleted = await self.sweep()
                    if deleted:
                        log.info("old events deleted", extra={"count": deleted})
            except Exception:
                log.exception("event sender: a store call failed; retrying")
            if claimed < limit:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.settings.poll_interval)

    async def _send(self, event: Outgoing) -> Delivery:
        try:
            delivery = await self._delivery.deliver(event)
        except Exception as exc:  # the port never raises; a bug must not lose the batch
            log.error("event %s: unexpected error delivering: %s", event.id, type(exc).__name__)
            delivery = Delivery(delivered=False, error=f"unexpected error: {type(exc).__name__}")
        if not delivery.delivered:
            log.warning(
                "event %s (%s of task %s) attempt %d failed: %s",
                event.id,
                event.type.value,
                event.task_name,
                event.attempts,
                delivery.error,
                extra={"event_id": str(event.id), "task_id": str(event.task_id)},
            )
        return delivery

    def _settled(self, event: Progress) -> None:
        self._observer.event_settled(event)
        if event.status is EventStatus.DROPPED:
            log.error(
                "event %s (%s of task %s) dropped after %d attempts: %s",
                event.id,
                event.type.value,
                event.task_name,
                event.attempts,
                event.last_error,
                extra={"event_id": str(event.id), "task_id": str(event.task_id)},
            )


class EventListing:
    """GET /events: the outbox, newest first, with the same cursors as other lists."""

    def __init__(self, store: EventStore) -> None:
        self._store = store

    async def list_events(
        self, status: EventStatus | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Event]:
        """Raises InvalidRequest for a bad limit or cursor."""
        check_limit(limit)
        after = None
        if cursor is not None:
            status, after = read_cursor(cursor, "events", _read_event_cursor)
        events = await self._store.list_events(status, after, limit + 1)
        listed = status.value if status else None
        return page_of(
            events,
            limit,
            "events",
            lambda last: {"status": listed, "key": instant_key(last.created_at, last.id)},
        )


def _read_event_cursor(payload: dict[str, Any]) -> tuple[EventStatus | None, EventPageKey]:
    status = EventStatus(payload["status"]) if payload["status"] else None
    return status, EventPageKey(*read_instant_key(payload["key"]))
