"""/calendars: create, list, read, replace, change, delete, import iCalendar."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Controller, Request, Response, delete, get, patch, post, put
from litestar.di import NamedDependency
from litestar.openapi.spec import (
    OpenAPIFormat,
    OpenAPIMediaType,
    OpenAPIType,
    Operation,
    RequestBody,
    Schema,
)
from litestar.params import BodyKwarg, PathParameter, QueryParameter

from adapters.ical import calendar_from_ics
from application.calendars import CalendarService
from domain.calendars import Calendar, StoredCalendar
from domain.errors import InvalidRequest
from entrypoints.http.auth import actor_of
from entrypoints.http.body import (
    MERGE_PATCH_JSON,
    JsonBody,
    JsonObjectBody,
    MergePatchBody,
    strictly,
)
from entrypoints.http.calendar_models import (
    CalendarByName,
    CalendarPage,
    CalendarPatch,
    CalendarResource,
    CalendarTasks,
)
from entrypoints.http.docs import ETAG, LOCATION, also, errors
from entrypoints.http.problems import problem
from entrypoints.http.tasks import Cursor, IfMatch, IfNoneMatch, expected_version, put_conditions

CalendarRef = Annotated[str, PathParameter(description="The calendar's name or its id.")]
Limit = Annotated[int, QueryParameter(ge=1, le=500, description="Page size, 1 to 500.")]
TEXT_CALENDAR = "text/calendar"
ICS_EXAMPLE = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//example//holidays//EN\r\n"
    "BEGIN:VEVENT\r\nUID:christmas@example.com\r\nDTSTAMP:20261201T000000Z\r\n"
    "DTSTART;VALUE=DATE:20261225\r\nSUMMARY:Christmas Day\r\nEND:VEVENT\r\n"
    "END:VCALENDAR\r\n"
)


@dataclass
class _ImportOperation(Operation):
    """The import's operation with its body described: the handler reads the raw body
    (a `text/calendar` string), which Litestar cannot see, so that generated clients and
    Schemathesis know what to send."""

    def __post_init__(self) -> None:
        self.request_body = RequestBody(
            required=True,
            description="iCalendar text (RFC 5545), UTF-8.",
            content={
                TEXT_CALENDAR: OpenAPIMediaType(
                    schema=Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.BINARY),
                    example=ICS_EXAMPLE,
                )
            },
        )


def calendar_response(
    calendar: StoredCalendar, status_code: int = 200, **headers: str
) -> Response[CalendarResource]:
    """A Calendar answer: the resource and its `ETag`."""
    return Response(
        CalendarResource.of(calendar),
        status_code=status_code,
        headers={"ETag": f'"{calendar.version}"', **headers},
    )


class CalendarController(Controller):
    path = "/calendars"
    tags = ["calendars"]

    @post(
        "/",
        status_code=201,
        dto=JsonBody[Calendar],
        return_dto=None,
        operation_id="createCalendar",
        summary="Create a calendar",
        description="Stores a named set of dates that triggers exclude or roll around. "
        "409 when the name is taken; 422 names every invalid field.",
        response_headers=[ETAG, LOCATION],
        responses=errors(400, 409, 415, 422),
    )
    async def create_calendar(
        self,
        data: Annotated[Calendar, BodyKwarg()],
        calendars: NamedDependency[CalendarService],
    ) -> Response[CalendarResource]:
        stored = await calendars.create(data)
        return calendar_response(stored, 201, Location=f"/calendars/{stored.name}")

    @get(
        "/",
        operation_id="listCalendars",
        summary="List calendars",
        description="Ordered by name, a page at a time.",
        responses=errors(422, mutation=False),
    )
    async def list_calendars(
        self,
        calendars: NamedDependency[CalendarService],
        limit: Limit = 50,
        cursor: Cursor = None,
    ) -> CalendarPage:
        page = await calendars.list_calendars(limit, cursor)
        return CalendarPage(
            items=[CalendarResource.of(c) for c in page.items], next_cursor=page.next_cursor
        )

    @get(
        "/{name:str}",
        operation_id="getCalendar",
        summary="Read a calendar",
        description="The calendar by its name or its id, with its version as the `ETag`.",
        response_headers=[ETAG],
        responses=errors(404, mutation=False),
    )
    async def get_calendar(
        self, name: CalendarRef, calendars: NamedDependency[CalendarService]
    ) -> Response[CalendarResource]:
        return calendar_response(await calendars.get(name))

    @get(
        "/{name:str}/tasks",
        operation_id="getCalendarTasks",
        summary="The tasks naming a calendar",
        description="The names of the tasks whose trigger names the calendar, sorted.",
        responses=errors(404, mutation=False),
    )
    async def calendar_tasks(
        self, name: CalendarRef, calendars: NamedDependency[CalendarService]
    ) -> CalendarTasks:
        return CalendarTasks(tasks=await calendars.tasks(name))

    @put(
        "/{name:str}",
        dto=JsonObjectBody[CalendarByName],  # type: ignore[valid-type]  # a generated model
        return_dto=None,
        operation_id="putCalendar",
        summary="Create or replace a calendar by name",
        description="Creates the calendar (201) or replaces its writable fields whole (200), "
        "re-planning every task that names it. `If-Match` replaces only that version "
        "(`*`: only an existing calendar); `If-None-Match: *` only creates (412 when the "
        "calendar exists). A `name` in the body must be the one in the path.",
        response_headers=[ETAG],
        responses=errors(400, 412, 415, 422) | also(201, CalendarResource, "Created."),
    )
    async def put_calendar(
        self,
        name: Annotated[str, PathParameter(description="The calendar's name.")],
        data: Annotated[dict[str, Any], BodyKwarg()],
        calendars: NamedDependency[CalendarService],
        request: Request[Any, Any, Any],
        if_match: IfMatch = None,
        if_none_match: IfNoneMatch = None,
    ) -> Response[CalendarResource]:
        if data.get("name", name) != name:
            raise InvalidRequest("name", "must be the name in the path, or left out")
        calendar = strictly(Calendar, {**data, "name": name})
        conditions = put_conditions(if_match, if_none_match)
        stored, _, created = await calendars.replace(
            name, calendar, conditions, actor=actor_of(request)
        )
        return calendar_response(stored, 201 if created else 200)

    @patch(
        "/{name:str}",
        dto=MergePatchBody[CalendarPatch],  # type: ignore[valid-type]  # a generated model
        return_dto=None,
        operation_id="updateCalendar",
        summary="Change a calendar (JSON merge patch)",
        description="A JSON merge patch (RFC 7396) of the writable fields; `dates`, "
        "`yearly` and `weekdays` are replaced whole and `name` cannot change. Every task "
        "naming the calendar is re-planned in the same transaction. With `If-Match`, the "
        "change applies only to that version.",
        response_headers=[ETAG],
        responses=errors(400, 404, 412, 415, 422),
    )
    async def update_calendar(
        self,
        name: CalendarRef,
        data: Annotated[dict[str, Any], BodyKwarg(media_type=MERGE_PATCH_JSON)],
        calendars: NamedDependency[CalendarService],
        request: Request[Any, Any, Any],
        if_match: IfMatch = None,
    ) -> Response[CalendarResource]:
        stored, _ = await calendars.patch(
            name, data, expected_version(if_match, "calendar"), actor=actor_of(request)
        )
        return calendar_response(stored)

    @post(
        "/{name:str}/import",
        status_code=200,
        operation_id="importCalendar",
        operation_class=_ImportOperation,
        summary="Add the dates of an iCalendar body",
        description="The body is iCalendar (RFC 5545, `Content-Type: text/calendar`): the "
        "dates its all-day VEVENTs occur on (DTSTART, RRULE expanded, RDATE, less EXDATE; "
        "a plain FREQ=YEARLY as yearly days) are added to the calendar, which re-plans the "
        "tasks naming it. A body that does not parse is a 422 naming its line.",
        response_headers=[ETAG],
        responses=errors(404, 412, 415, 422),
    )
    async def import_calendar(
        self,
        name: CalendarRef,
        request: Request[Any, Any, Any],
        calendars: NamedDependency[CalendarService],
        if_match: IfMatch = None,
    ) -> Response[CalendarResource]:
        media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media_type != TEXT_CALENDAR:
            return _unsupported(media_type)
        raw = await request.body()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequest("body", "iCalendar text must be UTF-8") from None
        if "\x00" in text:
            raise InvalidRequest("body", "must not contain the NUL character (U+0000)")
        current = await calendars.get(name)
        # A long file with many recurrences takes a while to expand: off the event loop,
        # which keeps firing tasks meanwhile.
        found = await asyncio.to_thread(
            calendar_from_ics, current.name, text, today=calendars.today()
        )
        stored, _ = await calendars.add_dates(
            current.id, found, expected_version(if_match, "calendar"), actor=actor_of(request)
        )
        return calendar_response(stored)

    @delete(
        "/{name:str}",
        operation_id="deleteCalendar",
        summary="Delete a calendar",
        description="409, naming the tasks, while a task's trigger names it.",
        responses=errors(404, 409, 412),
    )
    async def delete_calendar(
        self,
        name: CalendarRef,
        calendars: NamedDependency[CalendarService],
        if_match: IfMatch = None,
    ) -> None:
        await calendars.delete(name, expected_version(if_match, "calendar"))


def _unsupported(media_type: str) -> Response[Any]:
    shown = media_type or "none"
    return problem(415, "unsupported-media-type", f"send {TEXT_CALENDAR}, not {shown}")
