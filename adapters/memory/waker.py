"""Wake-ups inside one process: a hub owned by the store, one waker per engine."""

from __future__ import annotations

import asyncio
import weakref


class InMemoryNotifier:
    """The channel of one in-memory store: every waker attached to it is woken on notify.

    It plays the part of PostgreSQL's NOTIFY channel; the store calls `notify()` after
    every mutation of a task and every cancel request.
    """

    def __init__(self) -> None:
        self._wakers: weakref.WeakSet[InMemoryWaker] = weakref.WeakSet()

    def attach(self, waker: InMemoryWaker) -> None:
        self._wakers.add(waker)

    def detach(self, waker: InMemoryWaker) -> None:
        self._wakers.discard(waker)

    def notify(self) -> None:
        for waker in list(self._wakers):
            waker.signal()


class InMemoryWaker:
    """A waker on an `InMemoryNotifier`. Listens from construction until `close()`;
    `start()` attaches it again after a close."""

    def __init__(self, notifier: InMemoryNotifier) -> None:
        self._notifier = notifier
        self._event = asyncio.Event()
        notifier.attach(self)

    def signal(self) -> None:
        self._event.set()

    async def start(self) -> None:
        self._notifier.attach(self)

    async def wait(self) -> None:
        await self._event.wait()
        self._event.clear()

    async def notify(self) -> None:
        self._notifier.notify()

    async def close(self) -> None:
        self._notifier.detach(self)
