"""The event sender: drains the outbox of this store, on every replica that runs an
engine. It claims due events (the store's claim: one replica per attempt, held for
`domain.events.CLAIM_LEASE`), starts each attempt at once (`application.event_flight`)
and settles the attempts that ended together, in one write, within `settle_delay` of
their end; the retry schedule and the drop are the domain's.

It never waits for a batch: while attempts are in flight it keeps claiming, up to
`SenderSettings.capacity` events in hand and `per_destination` attempts at once to one
URL, so a receiver that hangs holds its own slots and delays no other destination's
events. A claim leaves out the destinations it could give more than two rounds of
`per_destination` (`Flight.full`), so every event it takes starts within one attempt's
time (10 s) and is settled well before its lease (30 s) lets another replica take it.

Events come second to runs: while the local engine is busy (a burst: more runs due
than it has started), the sender claims a small batch (`SenderSettings.busy_batch_size`)
once every `busy_interval`, so that the burst has the core nearly to itself and events
still move; once the engine has caught up, full batches again. Attempts in flight go
on and are settled meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from application.bounds import check_limit
from application.event_flight import Flight
from application.pagination import (
    Page,
    instant_key,
    page_of,
    read_cursor,
    read_instant_key,
    same_filters,
)
from application.ports import Clock, EventPageKey, EventStore
from domain.errors import StoreUnavailable
from domain.events import Delivery, Event, EventStatus, Outgoing, Progress

log = logging.getLogger("scheduler.events")

# How often a yielding sender looks again whether the engine is still busy (seconds).
_YIELD_POLL = 0.1


class EventDelivery(Protocol):
    async def deliver(self, event: Outgoing) -> Delivery:
        """One attempt, never raising, answered within DELIVERY_TIMEOUT_SECONDS (the
        claim's lease counts on it: `domain.events.CLAIM_LEASE`)."""
        ...


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
    batch_size: int = 100  # events a claim takes at most (at most twice per_destination)
    capacity: int = 500  # events claimed and not yet sent, at most
    per_destination: int = 100  # attempts in flight to one URL at once
    poll_interval: float = 1.0  # seconds between looks at an outbox with nothing due
    # Ended attempts are settled together: once this many are in hand, or the oldest
    # has waited this long (seconds), or none is in flight: one write for many attempts
    # (about a hundred in bench/events.py); a retry's wait grows by at most this.
    settle_batch: int = 100
    settle_delay: float = 0.05
    retention: timedelta = timedelta(days=30)  # sent and dropped events are kept this long
    retention_sweep_interval: timedelta = timedelta(minutes=10)
    retention_batch_size: int = 1000
    # While the engine is busy, a batch of at most `busy_batch_size` this often
    # (seconds): events are never starved, and the burst keeps the core
    # (docs/performance.md, "Events").
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
        self._wake = asyncio.Event()  # a send ended, or stop() was called
        self._flight = Flight(self._send, self.settings.per_destination, self._wake.set)
        self._next_sweep: datetime | None = None
        self._next_count = 0.0  # time.monotonic() of the next pending count
        # No claim before this time.monotonic() unless one of the destinations the last
        # claim found full (`_skipped`) has room again: see `_turn`.
        self._claim_after = 0.0
        self._skipped: set[str] = set()
        self._settling: asyncio.Task[None] | None = None
        self._settle_after = 0.0
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
        settle it; how many were claimed. For tools and tests that step the sender:
        the running sender (`start`) never waits for a batch."""
        claimed = await self._claim(limit or self.settings.batch_size)
        await self._flight.drained()
        await self._settle()
        return claimed

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
        """Stop claiming; the events in hand are sent and settled first."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping.set()
        self._wake.set()
        await task

    async def _loop(self) -> None:
        while (wait := await self._turn()) is not None:
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)
            self._wake.clear()  # what woke it is handled by the next turn
        if self._settling is not None:
            await self._settling

    def _settle_soon(self) -> None:
        """Settle the ended attempts in a task of its own (one at a time): a claim does
        not wait for a settlement, nor a settlement for a claim."""
        if self._settling is None or self._settling.done():
            self._settling = asyncio.create_task(self._settle_apart())

    async def _settle_apart(self) -> None:
        try:
            await self._settle()
        except Exception:
            log.exception("event sender: settling failed; retrying")
            self._settle_after = time.monotonic() + self.settings.poll_interval
            if self._stopping.is_set():
                self._flight.results()  # given up: their claims lapse, they are sent again
        finally:
            self._wake.set()

    async def _turn(self) -> float | None:
        """Start settling the attempts that ended (when due), then claim if there is
        room and reason to; how long to wait, or less if a send or a settlement ends
        (None: stopped, nothing in hand)."""
        settings = self.settings
        settle_in = self._settle_in()
        if settle_in <= 0:
            self._settle_soon()
            settle_in = settings.poll_interval
        if self._stopping.is_set():
            # Done once nothing is in hand, sent or to settle.
            settling = self._settling is not None and not self._settling.done()
            if self._flight.held or self._flight.ended or settling:
                return settle_in
            return None
        try:
            if self.yielding():
                return min(_YIELD_POLL, settle_in)
            room = settings.capacity - self._flight.held
            if room <= 0:
                return settle_in
            early = self._claim_after - time.monotonic()
            if early > 0 and self._skipped <= set(self._flight.full(self._claim_size())):
                return min(early, settle_in)
            limit = min(self._claim_size(), room)
            claimed = await self._claim(limit)
            await self._housekeeping()
        except StoreUnavailable as exc:  # an outage: expected, said in one line
            log.warning("event sender: store unavailable; retrying", extra={"error": repr(exc)})
            return settings.poll_interval
        except Exception:
            log.exception("event sender: a store call failed; retrying")
            return settings.poll_interval
        # Claim again at once only after a full claim that left every destination open
        # (more may be due). Otherwise after a poll interval, or as soon as a destination
        # left out opens: a claim that leaves destinations out reads past their due
        # events, so it is not repeated on every send that ends.
        full = self._flight.full(self._claim_size())
        if claimed == limit and not full:
            self._claim_after, self._skipped = 0.0, set()
            return 0
        self._claim_after = time.monotonic() + settings.poll_interval
        self._skipped = set(full)
        return min(settings.poll_interval, self._settle_in())

    def _settle_in(self) -> float:
        """Seconds until the ended attempts in hand are to be settled (0: now)."""
        flight, settings = self._flight, self.settings
        if not flight.ended:
            return settings.poll_interval
        backoff = self._settle_after - time.monotonic()  # after a failed settlement
        if backoff > 0:
            return backoff
        if flight.ended >= settings.settle_batch or not flight.held or self._stopping.is_set():
            return 0.0
        return flight.first_ended + settings.settle_delay - time.monotonic()

    def _claim_size(self) -> int:
        settings = self.settings
        if self._busy is not None and self._busy():
            return settings.busy_batch_size
        return settings.batch_size

    async def _claim(self, limit: int) -> int:
        """Claim up to `limit` events (at most twice `per_destination`), none for the
        destinations it could give more than two rounds, and start them; how many."""
        self._last_claim = self._clock.now()
        limit = min(limit, 2 * self.settings.per_destination)
        claimed = await self._store.claim_events(self._last_claim, limit, self._flight.full(limit))
        for event in claimed:
            if event.status is EventStatus.DROPPED:  # its claim lapsed past the deadline
                self._settled(event)
        self._flight.add(event for event in claimed if event.status is EventStatus.PENDING)
        return len(claimed)

    async def _settle(self) -> None:
        """Record every attempt that ended, in one write, timed now: a retry waits
        from the end of its own attempt (give or take `settle_delay`), not of the
        slowest attempt beside it."""
        results = self._flight.results()
        if not results:
            return
        try:
            settled = await self._store.record_deliveries(results, self._clock.now())
        except Exception:
            # Tried again next turn; should the lease lapse first, the store refuses it.
            self._flight.put_back(results)
            raise
        for event in settled:
            self._settled(event)

    async def _housekeeping(self) -> None:
        """The pending gauge (at most once a poll interval) and the retention sweep."""
        if time.monotonic() >= self._next_count:
            self._next_count = time.monotonic() + self.settings.poll_interval
            self._observer.events_pending(await self._store.count_events(EventStatus.PENDING))
        now = self._clock.now()
        if self._next_sweep is None or now >= self._next_sweep:
            self._next_sweep = now + self.settings.retention_sweep_interval
            deleted = await self.sweep()
            if deleted:
                log.info("old events deleted", extra={"count": deleted})

    async def _send(self, event: Outgoing) -> Delivery:
        try:
            delivery = await self._delivery.deliver(event)
        except Exception as exc:  # the port never raises; a bug must not lose the event
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
            carried, after = read_cursor(cursor, "events", _read_event_cursor)
            same_filters({"status": status}, {"status": carried})
            status = carried
        events = await self._store.list_events(status, after, limit + 1)
        listed = status.value if status else None
        return page_of(
            events,
            limit,
            "events",
            lambda last: {"status": listed, "key": instant_key(last.created_at, last.id)},
        )


def _read_event_cursor(payload: dict[str, Any]) -> tuple[EventStatus | None, EventPageKey]:
    status = EventStatus(payload["status"]) if payload["status"] is not None else None
    return status, EventPageKey(*read_instant_key(payload["key"]))
