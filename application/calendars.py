"""Use cases of the `/calendars` resource (docs/api.md, "Calendars"), and the lookup of
the calendars a trigger names, which every task use case goes through."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import date
from itertools import count
from typing import Any, Protocol
from uuid import UUID, uuid4

from pydantic import ValidationError

from application.bounds import check_limit
from application.calendar_store import CalendarStore
from application.contention import before_retry
from application.pagination import Page, page_of, read_cursor
from application.patching import merge_patch, unknown_removals
from application.ports import Clock, TaskStore
from application.refs import by_id_or_name
from domain.calendars import CALENDAR_FIELDS, Calendar, StoredCalendar, empty_calendar
from domain.errors import (
    CalendarNotFound,
    CalendarVersionConflict,
    DuplicateCalendarName,
    InvalidRequest,
)
from domain.instants import truncate
from domain.preconditions import PutConditions
from domain.triggers import Trigger
from domain.validation import field_errors


class SchedulerStore(TaskStore, CalendarStore, Protocol):
    """What both stores are: tasks, runs, history and calendars in one database."""


async def calendars_for(
    store: CalendarStore, *triggers: Trigger, strict: bool = True, field: str = "trigger"
) -> dict[str, Calendar]:
    """The stored calendars `triggers` name, by name. `strict`: a name not stored is an
    InvalidRequest on `<field>.calendar.name` (docs/api.md: a 422); otherwise it reads
    as a calendar holding no date (explaining a past occurrence of a task whose
    calendar went)."""
    names = {ref.name for trigger in triggers if (ref := trigger.calendar_ref()) is not None}
    if not names:
        return {}
    found: dict[str, Calendar] = dict(await store.calendars_named(names))
    for name in sorted(names - set(found)):
        if strict:
            raise InvalidRequest(f"{field}.calendar.name", f"no calendar named {name!r} exists")
        found[name] = empty_calendar(name)
    return found


class CalendarReader(Protocol):
    """Where `stored_calendars` reads: a CalendarStore, or a hold's transaction
    (`TaskHold`)."""

    async def calendars_named(self, names: Collection[str]) -> dict[str, StoredCalendar]: ...


async def stored_calendars(
    store: CalendarReader, triggers: Sequence[Trigger]
) -> dict[str, StoredCalendar]:
    """The stored calendars among those `triggers` name, in one read."""
    names = {ref.name for trigger in triggers if (ref := trigger.calendar_ref()) is not None}
    return await store.calendars_named(names) if names else {}


def check_named(trigger: Trigger, calendars: Mapping[str, Calendar] | None) -> None:
    """Raises InvalidRequest on `trigger.calendar.name` when the calendar the trigger
    names is not among `calendars` (those `calendars_for` found stored)."""
    ref = trigger.calendar_ref()
    if ref is not None and (calendars is None or ref.name not in calendars):
        raise InvalidRequest("trigger.calendar.name", f"no calendar named {ref.name!r} exists")


class CalendarService:
    """Create, read, change and delete calendars; a change re-plans the tasks naming it
    (the store does that in the transaction of the change)."""

    def __init__(self, store: CalendarStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def today(self) -> date:
        """The clock's date (UTC): the day an imported calendar is read on (how far its
        open-ended recurrences are expanded)."""
        return self._clock.now().date()

    async def create(self, calendar: Calendar) -> StoredCalendar:
        """Raises DuplicateCalendarName."""
        now = truncate(self._clock.now())
        stored = StoredCalendar(
            **_fields(calendar), id=uuid4(), version=1, created_at=now, updated_at=now
        )
        return await self._store.create_calendar(stored)

    async def get(self, ref: str | UUID) -> StoredCalendar:
        """The calendar with this id or, failing that, this name. Raises CalendarNotFound."""
        store = self._store
        return await by_id_or_name(
            ref, store.get_calendar_by_id, store.get_calendar, CalendarNotFound
        )

    async def list_calendars(
        self, limit: int = 50, cursor: str | None = None
    ) -> Page[StoredCalendar]:
        check_limit(limit)
        after = None
        if cursor is not None:
            after = read_cursor(cursor, "calendars", _read_after)
        found = await self._store.list_calendars(after, limit + 1)
        return page_of(found, limit, "calendars", lambda last: {"after": last.name})

    async def tasks(self, ref: str | UUID) -> list[str]:
        """The names of the tasks naming the calendar. Raises CalendarNotFound."""
        return await self._store.calendar_tasks((await self.get(ref)).name)

    async def patch(
        self,
        ref: str | UUID,
        patch: dict[str, Any],
        if_match: int | None = None,
        *,
        actor: str | None = None,
    ) -> tuple[StoredCalendar, int]:
        """A JSON merge patch (RFC 7396) of the writable fields; lists are replaced
        whole. Returns the calendar and how many tasks were re-planned."""
        if not isinstance(patch, dict):
            raise InvalidRequest("body", "a merge patch must be a JSON object")

        def change(current: StoredCalendar) -> Calendar:
            merged = merge_patch(_fields(current, json=True), patch)
            if merged.get("name") != current.name:
                raise InvalidRequest("name", "a calendar's name does not change (tasks name it)")
            unknown = unknown_removals(patch, Calendar)
            try:
                calendar = _validated(merged)
            except InvalidRequest as exc:
                raise InvalidRequest.of([*unknown, *exc.errors]) from None
            if unknown:
                raise InvalidRequest.of(unknown)
            return calendar

        return await self._change(ref, change, if_match, actor)

    async def replace(
        self,
        name: str,
        calendar: Calendar,
        conditions: PutConditions = PutConditions(),
        *,
        actor: str | None,
    ) -> tuple[StoredCalendar, int, bool]:
        """PUT: create the calendar `name` names, or replace its writable fields whole.
        Returns the calendar, how many tasks were re-planned and whether it was created.
        `conditions` hold as for a task's PUT."""
        if calendar.name != name:
            raise InvalidRequest("name", f"must be the name in the path, {name!r}")
        if_match = conditions.version
        for attempt in count():
            try:
                current = await self._store.get_calendar(name)
            except CalendarNotFound:
                conditions.check("calendar", name, stored=False)
                try:
                    return await self.create(calendar), 0, True
                except DuplicateCalendarName:
                    # Created meanwhile (another PUT of the same file): replace it
                    # instead, or refuse by the conditions, as a task's PUT does.
                    await before_retry(attempt, f"calendar {name!r}")
                    continue
            break
        conditions.check("calendar", name, stored=True)
        if _fields(current) == _fields(calendar):
            # As for tasks, a PUT that changes nothing keeps the version (deploy
            # pipelines PUT the same files again and again).
            if if_match is not None and current.version != if_match:
                raise CalendarVersionConflict(name, if_match, current.version)
            return current, 0, False
        stored, replanned = await self._change(current.id, lambda _: calendar, if_match, actor)
        return stored, replanned, False

    async def add_dates(
        self, ref: str | UUID, found: Calendar, if_match: int | None = None, *, actor: str | None
    ) -> tuple[StoredCalendar, int]:
        """Add the dates and yearly days of `found` (an imported iCalendar) to the calendar."""

        def change(current: StoredCalendar) -> Calendar:
            fields = _fields(current, json=True)
            # Kept where they first came, as everywhere a calendar's dates are given: the
            # calendar's own, then the import's new ones in the file's order.
            fields["dates"] = [*fields["dates"], *(d.isoformat() for d in found.dates)]
            fields["yearly"] = [*fields["yearly"], *found.yearly]
            return _validated(fields)

        return await self._change(ref, change, if_match, actor)

    async def delete(self, ref: str | UUID, if_match: int | None = None) -> None:
        """Raises CalendarNotFound, CalendarVersionConflict, CalendarInUse."""
        current = await self.get(ref)
        await self._store.delete_calendar(current.name, if_match)

    async def _change(
        self,
        ref: str | UUID,
        change: Any,
        if_match: int | None,
        actor: str | None,
    ) -> tuple[StoredCalendar, int]:
        for attempt in count():
            current = await self.get(ref)
            if if_match is not None and current.version != if_match:
                raise CalendarVersionConflict(current.name, if_match, current.version)
            wanted: Calendar = change(current)
            if _fields(wanted) == _fields(current):
                # Nothing to write: the calendar and the tasks naming it keep their
                # versions (a PATCH of `{}`, an import of dates it already holds).
                return current, 0
            now = truncate(self._clock.now())
            new = current.model_copy(update={**_fields(wanted), "updated_at": now})
            try:
                return await self._store.update_calendar(new, current.version, actor=actor)
            except CalendarVersionConflict:
                if if_match is not None:
                    raise
            await before_retry(attempt, f"calendar {current.name!r}")
        raise AssertionError("unreachable")  # count() never ends; before_retry raises


def _fields(calendar: Calendar, *, json: bool = False) -> dict[str, Any]:
    return calendar.model_dump(mode="json" if json else "python", include=set(CALENDAR_FIELDS))


def _validated(fields: Mapping[str, Any]) -> Calendar:
    try:
        return Calendar.model_validate(fields)
    except ValidationError as exc:
        raise InvalidRequest.of(field_errors(exc)) from None


def _read_after(payload: dict[str, Any]) -> str:
    """The name a calendar cursor lists after."""
    after = payload.get("after")
    if not isinstance(after, str):
        raise ValueError("not a calendar name")
    return after
