"""The TaskStore port in memory, with the semantics of the PostgreSQL store.

One `InMemoryTaskStore` is one database: several engines of one process may share it,
and an asyncio lock makes each claim atomic, as a PostgreSQL transaction with
`FOR UPDATE SKIP LOCKED` does. Every task goes in and comes out as a deep copy, so no
caller ever holds state the store holds.

The store is its parts, a module each, as the PostgreSQL store's: `task_reads`,
`task_writes`, `run_starts` (claims, manual runs), `run_ends` (outcomes, lost leases),
`run_reads`, `cancels`, `retention`; `state` holds the state and lookups they share.
"""

from __future__ import annotations

import asyncio
from uuid import UUID

from adapters.memory.backfills import MemoryBackfills
from adapters.memory.calendars import InMemoryCalendars
from adapters.memory.cancels import Cancels
from adapters.memory.outbox import MemoryOutbox
from adapters.memory.retention import Retention
from adapters.memory.run_ends import RunEnds
from adapters.memory.run_reads import RunReads
from adapters.memory.run_starts import RunStarts
from adapters.memory.slots import Lease, SlotBook
from adapters.memory.task_reads import TaskReads
from adapters.memory.task_writes import TaskWrites
from adapters.memory.waker import InMemoryNotifier, InMemoryWaker
from domain.calendars import StoredCalendar
from domain.events import EventRules
from domain.history import TaskVersion
from domain.runs import Run
from domain.tasks import Task


class InMemoryTaskStore(
    TaskReads, TaskWrites, RunStarts, RunEnds, RunReads, Cancels, Retention, InMemoryCalendars
):
    """A full `TaskStore` in one process. `notifier` is its wake-up channel; `outbox`
    its EventStore, written under the same lock as the causes of its events (`events`
    says which events a cause raises)."""

    def __init__(self, events: EventRules | None = None) -> None:
        self.notifier = InMemoryNotifier()
        self._lock = asyncio.Lock()
        self._rules = events or EventRules()
        self.outbox = MemoryOutbox(self._lock)
        self._tasks: dict[UUID, Task] = {}
        self._names: dict[str, UUID] = {}
        self._runs: dict[UUID, Run] = {}
        self._leases: dict[UUID, Lease] = {}  # by run id
        self._history: dict[UUID, list[TaskVersion]] = {}  # by task id, oldest first
        self._slots = SlotBook(self._runs, self._leases)
        self._calendars: dict[str, StoredCalendar] = {}  # by name
        self.backfills = MemoryBackfills(
            self._lock,
            self._task,
            self._runs,
            self._leases,
            self._slots,
            self.notifier.notify,
            self._tasks,
            self._rules,
            self.outbox,
        )

    def new_waker(self) -> InMemoryWaker:
        """A waker that every mutation of this store wakes."""
        return InMemoryWaker(self.notifier)

    async def ping(self) -> None:
        return None
