"""The CalendarStore port in memory: the calendars part of `InMemoryTaskStore`.

A mixin, so that the calendars share the store's lock, tasks and history: a calendar
change re-plans the tasks naming it under the same lock as any other write (one
transaction, as on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Collection
from uuid import UUID

from adapters.memory.state import MemoryStoreBase
from domain.calendars import StoredCalendar
from domain.errors import (
    CalendarInUse,
    CalendarNotFound,
    CalendarVersionConflict,
    DuplicateCalendarName,
)
from domain.replanning import calendar_name, replanned_all


class InMemoryCalendars(MemoryStoreBase):
    """Calendars by name, beside the tasks of the store that mixes this in."""

    async def create_calendar(self, calendar: StoredCalendar) -> StoredCalendar:
        async with self._lock:
            if calendar.name in self._calendars:
                raise DuplicateCalendarName(calendar.name)
            stored = calendar.model_copy(update={"version": 1})
            self._calendars[calendar.name] = stored
        return stored

    async def get_calendar(self, name: str) -> StoredCalendar:
        found = self._calendars.get(name)
        if found is None:
            raise CalendarNotFound(name)
        return found

    async def get_calendar_by_id(self, calendar_id: UUID) -> StoredCalendar:
        for calendar in self._calendars.values():
            if calendar.id == calendar_id:
                return calendar
        raise CalendarNotFound(calendar_id)

    async def list_calendars(self, after: str | None, limit: int) -> list[StoredCalendar]:
        names = sorted(name for name in self._calendars if after is None or name > after)
        return [self._calendars[name] for name in names[:limit]]

    async def calendars_named(self, names: Collection[str]) -> dict[str, StoredCalendar]:
        return self._named_calendars(names)

    async def calendar_tasks(self, name: str) -> list[str]:
        return sorted(t.name for t in self._tasks.values() if calendar_name(t) == name)

    async def update_calendar(
        self, calendar: StoredCalendar, expected_version: int, *, actor: str | None = None
    ) -> tuple[StoredCalendar, int]:
        async with self._lock:
            stored = self._calendar(calendar.name, expected_version)
            new = calendar.model_copy(
                update={
                    "id": stored.id,
                    "created_at": stored.created_at,
                    "version": stored.version + 1,
                }
            )
            self._calendars[new.name] = new
            versions = (stored.version, new.version)
            naming = [t for t in self._tasks.values() if calendar_name(t) == new.name]
            for task_after, version in replanned_all(naming, new, versions, new.updated_at, actor):
                self._tasks[task_after.id] = task_after
                self._history.setdefault(task_after.id, []).append(version)
        self.notifier.notify()
        return new, len(naming)

    async def delete_calendar(self, name: str, expected_version: int | None = None) -> None:
        async with self._lock:
            self._calendar(name, expected_version)
            naming = sorted(t.name for t in self._tasks.values() if calendar_name(t) == name)
            if naming:
                raise CalendarInUse(name, naming)
            del self._calendars[name]

    def _calendar(self, name: str, expected_version: int | None) -> StoredCalendar:
        stored = self._calendars.get(name)
        if stored is None:
            raise CalendarNotFound(name)
        if expected_version is not None and stored.version != expected_version:
            raise CalendarVersionConflict(name, expected_version, stored.version)
        return stored
