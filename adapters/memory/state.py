"""What every part of `InMemoryTaskStore` stands on: its tables, lock, notifier and
outbox, and the lookups and run records the parts share."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pydantic import BaseModel

from adapters.memory.outbox import MemoryOutbox
from adapters.memory.slots import Lease, SlotBook
from adapters.memory.waker import InMemoryNotifier
from domain.calendars import StoredCalendar
from domain.errors import (
    InvalidRequest,
    RunNotFound,
    TaskNotFound,
)
from domain.events import EventRules, TaskRef
from domain.history import TaskVersion
from domain.outcomes import finished
from domain.runs import Run, RunOutcome
from domain.tasks import Task

if TYPE_CHECKING:
    from adapters.memory.backfills import MemoryBackfills


class MemoryStoreBase:
    """The state the parts of the store share (set by `InMemoryTaskStore.__init__`), and
    its internals: callers hold the lock where they write."""

    notifier: InMemoryNotifier
    _lock: asyncio.Lock
    _rules: EventRules
    outbox: MemoryOutbox
    _tasks: dict[UUID, Task]
    _names: dict[str, UUID]
    _runs: dict[UUID, Run]
    _leases: dict[UUID, Lease]  # by run id
    _history: dict[UUID, list[TaskVersion]]  # by task id, oldest first
    _slots: SlotBook
    _calendars: dict[str, StoredCalendar]  # by name
    backfills: MemoryBackfills

    def _check_calendar_named(self, task: Task) -> None:
        """A task write naming a calendar that is not stored is a 422 (callers hold the
        lock, so the calendar cannot go before the write lands)."""
        ref = task.trigger.calendar_ref()
        if ref is not None and ref.name not in self._calendars:
            raise InvalidRequest("trigger.calendar.name", f"no calendar named {ref.name!r} exists")

    def _named_calendars(self, names: Collection[str]) -> dict[str, StoredCalendar]:
        """The stored calendars among `names` (`calendars_named`, also a hold's)."""
        return {name: self._calendars[name] for name in names if name in self._calendars}

    def _task(self, task_id: UUID) -> Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise TaskNotFound(task_id)
        return task

    def _run(self, run_id: UUID) -> Run:
        run = self._runs.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        return run

    def _refs(self, runs: Sequence[Run]) -> dict[UUID, TaskRef]:
        """What the event rules read of the tasks of `runs` (a deleted one left out)."""
        return {
            run.task_id: TaskRef.of(task)
            for run in runs
            if (task := self._tasks.get(run.task_id)) is not None
        }

    def _active_leases(self, task_id: UUID, now: datetime) -> int:
        return sum(
            1
            for lease in self._leases.values()
            if lease.task_id == task_id and lease.expires_at > now
        )

    def _finish(self, run: Run, outcome: RunOutcome) -> Run:
        ended = finished(run, outcome)
        self._runs[run.id] = ended
        self._leases.pop(run.id, None)
        return ended


def copy_task(task: Task) -> Task:
    """A deep copy: no caller ever holds state the store holds."""
    copied: Task = _fresh(task)
    return copied


def _fresh(value: Any) -> Any:
    """`value` with every list and dict in it copied. Models are frozen: one holding a
    list or dict is copied shallowly around fresh ones, one holding none is shared, as
    is everything else in a task (text, numbers, instants, ids). `copy.deepcopy` cost
    more than the rest of an API read."""
    kind = type(value)
    if kind is list:
        return [_fresh(item) for item in value]
    if kind is dict:
        return {key: _fresh(item) for key, item in value.items()}
    if kind is tuple:
        return tuple(_fresh(item) for item in value)
    if isinstance(value, BaseModel):
        fields = value.__dict__
        fresh = {name: new for name, item in fields.items() if (new := _fresh(item)) is not item}
        if not fresh:
            return value
        copied = copy.copy(value)
        copied.__dict__.update(fresh)
        return copied
    return value
