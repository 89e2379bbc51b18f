"""The in-memory store's outbox: events kept in a dict, claimed and settled by the
domain's rules (`domain.events`), exactly as the PostgreSQL outbox does. The store calls
it under its own lock, so an event is written together with the outcome that raised it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from uuid import UUID

from application.ports import EventPageKey
from domain.events import (
    Delivery,
    Event,
    EventStatus,
    Outgoing,
    Progress,
    attempted,
    claimed,
    lapsed,
    outgoing,
    progress_of,
)


class MemoryOutbox:
    """The EventStore port of an in-memory store; `lock` is the store's."""

    def __init__(self, lock: asyncio.Lock) -> None:
        self._lock = lock
        self._events: dict[UUID, Event] = {}

    # -- EventStore -------------------------------------------------------------

    async def claim_events(
        self, now: datetime, limit: int, skip: Collection[str] = ()
    ) -> list[Outgoing]:
        await asyncio.sleep(0)  # a round trip, so that senders sharing the store interleave
        async with self._lock:
            return self.claim(now, limit, skip)

    async def record_deliveries(
        self, results: Sequence[tuple[UUID, int, Delivery]], now: datetime
    ) -> list[Progress]:
        async with self._lock:
            return self.record(results, now)

    async def list_events(
        self, status: EventStatus | None, after: EventPageKey | None, limit: int
    ) -> list[Event]:
        return self.list(status, after, limit)

    async def count_events(self, status: EventStatus) -> int:
        return self.count(status)

    async def delete_events_before(self, cutoff: datetime, batch: int) -> int:
        async with self._lock:
            return self.delete_before(cutoff, batch)

    # -- under the store's lock ----------------------------------------------------

    def add(self, events: Iterable[Event]) -> None:
        for event in events:
            self._events[event.id] = event

    def claim(self, now: datetime, limit: int, skip: Collection[str] = ()) -> list[Outgoing]:
        due = sorted(
            (
                e
                for e in self._events.values()
                if e.status is EventStatus.PENDING
                and e.next_attempt_at is not None
                and e.next_attempt_at <= now
                and e.destination.url not in skip
            ),
            key=lambda e: (e.next_attempt_at, e.id),
        )[:limit]
        taken = []
        for event in due:
            changed = lapsed(event, now) or claimed(event, now)
            self._events[event.id] = changed
            taken.append(outgoing(changed))
        return taken

    def record(
        self, results: Sequence[tuple[UUID, int, Delivery]], now: datetime
    ) -> list[Progress]:
        settled = []
        for event_id, attempts, delivery in results:
            event = self._events.get(event_id)
            # Only the claim that made this attempt settles it: a claim that lapsed and
            # was taken over (the attempts moved on) has lost its say.
            if event is None or event.status is not EventStatus.PENDING:
                continue
            if event.attempts != attempts:
                continue
            event = attempted(event, delivery, now)
            self._events[event_id] = event
            settled.append(progress_of(event))
        return settled

    def list(
        self, status: EventStatus | None, after: EventPageKey | None, limit: int
    ) -> list[Event]:
        chosen = [e for e in self._events.values() if status is None or e.status is status]
        chosen.sort(key=lambda e: (e.created_at, e.id), reverse=True)
        if after is not None:
            chosen = [e for e in chosen if (e.created_at, e.id) < (after.created_at, after.id)]
        return chosen[:limit]

    def count(self, status: EventStatus) -> int:
        return sum(1 for e in self._events.values() if e.status is status)

    def delete_before(self, cutoff: datetime, batch: int) -> int:
        old = sorted(
            (
                e
                for e in self._events.values()
                if e.status is not EventStatus.PENDING
                and e.finished_at is not None
                and e.finished_at < cutoff
            ),
            key=lambda e: (e.finished_at, e.id),
        )[:batch]
        for event in old:
            del self._events[event.id]
        return len(old)
