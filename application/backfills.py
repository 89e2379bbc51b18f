"""`POST /tasks/{id}/backfill` and `POST /backfills/{id}/cancel` (docs/policies.md,
"Backfill"): the use cases, and the port a store fills for them (each store's
`backfills`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID, uuid4

from application.calendar_store import CalendarStore
from application.calendars import calendars_for
from application.ports import Clock, RunDispatcher
from domain.backfills import (
    Backfill,
    BackfillOverlap,
    BackfillRequest,
    backfill_fire_times,
    check_overlap,
)
from domain.errors import BackfillNotFound, InvalidRequest
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
    ) -> Backfill:
        """Make a run with `backfill_id` for each of `occurrences` (oldest first; those
        with a succeeded run left out when `only_missing`), placed by
        `domain.backfills.backfill_plan`; with `dry_run` the same answer, nothing
        written. Raises TaskNotFound."""
        ...

    async def cancel_backfill(self, backfill_id: UUID, now: datetime) -> int:
        """Cancel the backfill's queued runs and ask its running ones to stop; how many.
        Raises BackfillNotFound when no run carries `backfill_id`."""
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
    ) -> None:
        self._store = store
        self._lookup = lookup  # a task by id or name (SchedulingService.get_task)
        self._clock = clock
        self._dispatcher = dispatcher
        self._replica = replica
        self._calendar_store = calendar_store  # the calendar a trigger names, as it is now

    async def backfill(self, ref: str | UUID, request: BackfillRequest) -> Backfill:
        """Re-run the task's occurrences in `[start, end]`. Raises TaskNotFound and
        InvalidRequest (nothing written)."""
        task = await self._lookup(ref)
        now = truncate(self._clock.now())
        start, end = _whole("start", request.start), _whole("end", request.end)
        calendars = None
        if self._calendar_store is not None:
            calendars = await calendars_for(self._calendar_store, task.trigger, strict=False)
        occurrences = backfill_fire_times(task, start, end, now, calendars)
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
        )
        if not request.dry_run:
            for claimed in made.to_call():
                self._dispatcher.dispatch(claimed)
        return made

    async def cancel(self, ref: str) -> int:
        try:
            backfill_id = UUID(ref)
        except ValueError:
            raise BackfillNotFound(ref) from None
        return await self._store.cancel_backfill(backfill_id, truncate(self._clock.now()))


def _whole(field: str, instant: datetime) -> datetime:
    try:
        return truncate(instant)
    except OverflowError:
        raise InvalidRequest(field, "is out of range once read in UTC") from None
