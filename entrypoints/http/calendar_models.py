"""What `/calendars` sends and receives (docs/api.md, "Calendars"): the domain's
`Calendar` is the request body; the resource adds what the store keeps."""

from __future__ import annotations

from uuid import UUID

from pydantic import BaseModel, Field

from domain.calendars import Calendar, StoredCalendar
from entrypoints.http.models import UtcDatetime, _by_name, _partial


class CalendarResource(Calendar):
    """A stored calendar: its writable fields, its id and its version (the `ETag`)."""

    id: UUID
    version: int = Field(description="bumped by every change; the ETag")
    created_at: UtcDatetime
    updated_at: UtcDatetime

    @classmethod
    def of(cls, calendar: StoredCalendar) -> CalendarResource:
        return cls.model_validate(calendar.model_dump())


class CalendarPage(BaseModel):
    items: list[CalendarResource]
    next_cursor: str | None = Field(
        description="pass as ?cursor= for the next page; null at the end"
    )


class CalendarTasks(BaseModel):
    tasks: list[str] = Field(description="the names of the tasks naming the calendar, sorted")


# A merge patch of a calendar: lists are replaced whole; `name` cannot change.
CalendarPatch = _partial(Calendar, "CalendarPatch")
# What `PUT /calendars/{name}` takes.
CalendarByName = _by_name(Calendar, "CalendarByName")
