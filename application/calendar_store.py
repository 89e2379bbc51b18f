"""The port of stored calendars (docs/api.md, "Calendars"). Both stores fill it beside
`TaskStore`; docstrings are the contract."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol
from uuid import UUID

from domain.calendars import StoredCalendar


class CalendarStore(Protocol):
    """Calendars by name. A task write (create, update, apply) whose trigger names a
    calendar that is not stored raises InvalidRequest on `trigger.calendar.name` and
    writes nothing; that check is the store's, in the transaction of the write, so a
    calendar deleted meanwhile is never left named."""

    async def create_calendar(self, calendar: StoredCalendar) -> StoredCalendar:
        """Insert `calendar` as given (version 1). Raises DuplicateCalendarName."""
        ...

    async def get_calendar(self, name: str) -> StoredCalendar:
        """Raises CalendarNotFound."""
        ...

    async def get_calendar_by_id(self, calendar_id: UUID) -> StoredCalendar:
        """Raises CalendarNotFound."""
        ...

    async def list_calendars(self, after: str | None, limit: int) -> list[StoredCalendar]:
        """Up to `limit` calendars ordered by name, strictly after the name `after`."""
        ...

    async def calendars_named(self, names: Collection[str]) -> dict[str, StoredCalendar]:
        """The stored calendars among `names`, by name (a name not stored is left out)."""
        ...

    async def calendar_tasks(self, name: str) -> list[str]:
        """The names of the tasks whose trigger names the calendar, sorted."""
        ...

    async def update_calendar(
        self, calendar: StoredCalendar, expected_version: int, *, actor: str | None = None
    ) -> tuple[StoredCalendar, int]:
        """Write the writable fields of `calendar` (by its name) if the stored version is
        `expected_version`, bump the version and `updated_at` (to `calendar.updated_at`),
        and in the same transaction re-plan every task naming it
        (`domain.replanning.replanned`: its `next_fire_at`/`next_run_at`, a task version,
        a history version with cause calendar and `actor`), then notify the waker's
        channel. Returns the stored calendar and how many tasks were re-planned.
        Raises CalendarNotFound, CalendarVersionConflict."""
        ...

    async def delete_calendar(self, name: str, expected_version: int | None = None) -> None:
        """Delete the calendar. Raises CalendarNotFound, CalendarVersionConflict (when
        `expected_version` is given and stale) and CalendarInUse (naming the tasks) while
        a task names it, having deleted nothing."""
        ...
