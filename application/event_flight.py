"""The events a sender holds: claimed, and not yet sent (application/events.py).

Each destination URL has at most `per_destination` attempts in flight; its other events
wait their turn, in claim order. A send that ends hands its slot to the next event of
its destination at once, and leaves its result for the sender's next settlement (one
write for every result in hand). Nothing here waits for a batch: a slow destination
holds its own slots, no one else's."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from uuid import UUID

from domain.events import Delivery, Outgoing

Result = tuple[UUID, int, Delivery]  # event id, its attempts when claimed, how it went


class Flight:
    def __init__(
        self,
        send: Callable[[Outgoing], Awaitable[Delivery]],
        per_destination: int,
        ended: Callable[[], None],
    ) -> None:
        """`send` never raises; `ended` is called after each send, its result in hand."""
        self._send = send
        self._limit = per_destination
        self._ended = ended
        self._in_hand: dict[str, int] = {}  # by URL: sending and waiting
        self._waiting: dict[str, deque[Outgoing]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._results: list[Result] = []
        self.held = 0
        self.first_ended = 0.0  # time.monotonic() of the oldest result in hand

    def add(self, events: Iterable[Outgoing]) -> None:
        """Start each event's attempt, or queue it behind its destination's."""
        for event in events:
            url = event.destination.url
            held = self._in_hand.get(url, 0)
            self._in_hand[url] = held + 1
            self.held += 1
            if held < self._limit:
                self._start(event)
            else:
                self._waiting.setdefault(url, deque()).append(event)

    def full(self, claim: int) -> list[str]:
        """The destinations a claim of `claim` events must leave out: those that could
        then hold more than twice `per_destination`, a round in flight and the next one
        ready to start as it ends. So no claimed event waits behind more than one round
        of attempts, and a claim's round trip is not a gap in a destination's sending."""
        most = 2 * self._limit - claim
        return [url for url, held in self._in_hand.items() if held > most]

    @property
    def ended(self) -> int:
        """How many results are in hand, to be settled."""
        return len(self._results)

    def results(self) -> list[Result]:
        """The results of the sends that ended, taken out to be settled."""
        taken, self._results = self._results, []
        return taken

    def put_back(self, results: list[Result]) -> None:
        """Results whose settlement failed, to be tried again with the next ones."""
        self._results[:0] = results

    async def drained(self) -> None:
        """Wait until every event held has been sent."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    def _start(self, event: Outgoing) -> None:
        task = asyncio.create_task(self._attempt(event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _attempt(self, event: Outgoing) -> None:
        delivery = await self._send(event)
        if not self._results:
            self.first_ended = time.monotonic()
        self._results.append((event.id, event.attempts, delivery))
        url = event.destination.url
        self.held -= 1
        self._in_hand[url] -= 1
        if not self._in_hand[url]:
            del self._in_hand[url]
        queue = self._waiting.get(url)
        if queue:  # the slot passes to the destination's next event
            self._start(queue.popleft())
            if not queue:
                del self._waiting[url]
        self._ended()
