"""The console's events page: the outbox as `GET /events` lists it, newest first, so
that a notification that is still being retried, or was dropped, and why, can be seen
without the API (docs/api.md, "Console")."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, Response, get
from litestar.di import NamedDependency
from litestar.params import QueryParameter

from application.events import EventListing
from domain.errors import InvalidRequest
from domain.events import Event, EventStatus
from entrypoints.http.console.forms import status_filter
from entrypoints.http.console.rendering import render

EVENTS_PAGE_SIZE = 50
STATUSES = [status.value for status in EventStatus]


class EventPages(Controller):
    path = "/"

    @get("/events", name="console:events", include_in_schema=False)
    async def events(
        self,
        request: Request[Any, Any, Any],
        event_listing: NamedDependency[EventListing],
        status: Annotated[str, QueryParameter(max_length=200)] = "",
        cursor: Annotated[str | None, QueryParameter(max_length=2000)] = None,
    ) -> Response[str]:
        events: list[Event] = []
        next_cursor = None
        errors: dict[str, str] = {}
        try:
            wanted = status_filter(status, EventStatus)
            page = await event_listing.list_events(wanted, EVENTS_PAGE_SIZE, cursor or None)
            events, next_cursor = page.items, page.next_cursor
        except InvalidRequest as exc:  # shown above the form, which keeps what was chosen
            errors = {error.field: error.message for error in exc.errors}
        return render(
            request,
            "events.html",
            status_code=422 if errors else 200,
            errors=errors,
            events=events,
            status=status,
            statuses=STATUSES,
            next_cursor=next_cursor,
            paged=cursor is not None,
            live=not errors,
        )
