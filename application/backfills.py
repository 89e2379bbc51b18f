"""`POST /tasks/{id}/backfill` and `POST /backfills/{id}/cancel` (docs/policies.md,
"Backfill"): the use cases, and the port a store fills for them (each store's
`backfills`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Protocol
from uuid import UUID, uuid4

from application.bounds import in_range
from application.calendar_store import CalendarStore
from application.calendars import calendars_for
from application.ports import Clock, RunDispatcher
from domain.backfills import (
    Backfill,
    BackfillOverlap,
    BackfillRequest,
    BackfillState,
    backfill_fire_times,
    check_overlap,
)
from domain.errors import BackfillNotFound
from domain.instants import truncate
from domain.tasks import Task


class BackfillStore(Protocol):
    """A store's backfills: each written in one transaction, under the task's lease
    lock, so that its runs take the task's slots as claims do."""

    async def backfill(
        self,
        task_id: UUID,
        backfill_id: UUID,
        occurrences: Sequence[datetime],
        overlap: BackfillOverlap,
        only_missing: bool,
        now: datetime,
        replica: str,
        dry_run: bool,
        *,
        span: tuple[datetime, datetime] | None = None,
        actor: str | None = None,
    ) -> Backfill:
        """Make a run with `backfill_id` for each of `occurrences` (oldest first; those
        with a succeeded run left out when `only_missing`), placed by
        `domain.backfills.backfill_plan`, and the backfill's record
        (`domain.backfills.new_record`: the requested `span`, the `actor`); with
        `dry_run` the same answer, nothing written. Raises TaskNotFound."""
        ...

    async def get_backfill(self, backfill_id: UUID) -> BackfillState:
        """The backfill's record and its runs counted by status. Raises
        BackfillNotFound."""
        ...

    async def cancel_backfill(self, backfill_id: UUID, now: datetime) -> int:
        """Cancel the backfill's queued runs and ask its running ones to stop; how many.
        An active backfill becomes `cancelled`. Raises BackfillNotFound when there is no
        such backfill."""
        ...


class BackfillService:
    def __init__(
        self,
        store: BackfillStore,
        lookup: Callable[[str | UUID], Awaitable[Task]],
        clock: Clock,
        dispatcher: RunDispatcher,
        *,
        replica: str,
        calendar_store: CalendarStore | None = None,
        retention: timedelta | None = None,
    ) -> None:
        self._store = store
        self._lookup = lookup  # a task by id or name (SchedulingService.get_task)
        self._clock = clock
        self._dispatcher = dispatcher
        self._replica = replica
        self._calendar_store = calendar_store  # the calendar a trigger names, as it is now
        self._retention = retention  # runs scheduled longer ago are swept: none made there

    async def backfill(
        self, ref: str | UUID, request: BackfillRequest, *, actor: str | None = None
    ) -> Backfill:
        """Re-run the task's occurrences in `[start, end]`. Raises TaskNotFound and
        InvalidRequest (nothing written)."""
        task = await self._lookup(ref)
        now = truncate(self._clock.now())
        start, end = in_range("start", request.start), in_range("end", request.end)
        calendars = None
        if self._calendar_store is not None:
            calendars = await calendars_for(self._calendar_store, task.trigger, strict=False)
        occurrences = backfill_fire_times(task, start, end, now, calendars, self._retention)
        check_overlap(task, request.overlap)
        made = await self._store.backfill(
            task.id,
            uuid4(),
            occurrences,
            request.overlap,
            request.only_missing,
            now,
            self._replica,
            request.dry_run,
            span=(start, end),
            actor=actor,
        )
        if not request.dry_run:
            for claimed in made.to_call():
                self._dispatcher.dispatch(claimed)
        return made

    async def get(self, ref: str) -> BackfillState:
        return await self._store.get_backfill(_backfill_id(ref))

    async def cancel(self, ref: str) -> int:
        return await self._store.cancel_backfill(_backfill_id(ref), truncate(self._clock.now()))


def _backfill_id(ref: str) -> UUID:
    try:
        return UUID(ref)
    except ValueError:
        raise BackfillNotFound(ref) from None
