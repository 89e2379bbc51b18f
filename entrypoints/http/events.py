"""/events: the outbox, newest first (docs/api.md, "Events")."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from litestar import Controller, get
from litestar.di import NamedDependency
from litestar.params import QueryParameter
from pydantic import BaseModel, Field, JsonValue

from application.bounds import MAX_PAGE
from application.events import EventListing
from domain.events import Event, EventStatus
from domain.tasks import EventType
from entrypoints.http.docs import errors
from entrypoints.http.models import UtcDatetime
from entrypoints.http.query import NON_EMPTY


class EventResource(BaseModel):
    """One event and how its delivery goes. The destination's secrets are names of
    variables and are not shown; its URL is."""

    id: UUID = Field(description="also the webhook-id of every attempt")
    type: EventType
    task_id: UUID
    task_name: str
    run_id: UUID | None
    url: str = Field(description="where it is sent")
    status: EventStatus
    attempts: int
    created_at: UtcDatetime
    next_attempt_at: UtcDatetime | None = Field(description="pending: when it is tried next")
    deadline: UtcDatetime = Field(description="no attempt starts after this; then dropped")
    finished_at: UtcDatetime | None = Field(description="when it was sent or dropped")
    http_status: int | None = Field(description="the answer to the last attempt")
    last_error: str | None
    payload: dict[str, JsonValue] = Field(description="the body every attempt sends")

    @classmethod
    def of(cls, event: Event) -> EventResource:
        fields = event.model_dump(exclude={"destination"})
        return cls.model_validate(fields | {"url": event.destination.url})


class EventPage(BaseModel):
    items: list[EventResource]
    next_cursor: str | None = Field(
        description="pass as ?cursor= for the next (older) page; null at the end"
    )


class EventController(Controller):
    path = "/events"
    tags = ["events"]

    @get(
        "/",
        operation_id="listEvents",
        summary="Events, newest first",
        description="Ordered by (`created_at`, `id`), newest first; every event appears "
        "exactly once across pages. The cursor carries the status filter (another status "
        "sent beside it is a 422).",
        responses=errors(422, mutation=False),
    )
    async def list_events(
        self,
        event_listing: NamedDependency[EventListing],
        status: Annotated[
            EventStatus | None, QueryParameter(description="pending, sent or dropped.")
        ] = None,
        limit: Annotated[
            int, QueryParameter(ge=1, le=MAX_PAGE, description="Page size, 1 to 500.")
        ] = 50,
        cursor: Annotated[
            str | None,
            QueryParameter(
                schema_extra=NON_EMPTY, description="`next_cursor` of the previous page."
            ),
        ] = None,
    ) -> EventPage:
        page = await event_listing.list_events(status, limit, cursor)
        return EventPage(
            items=[EventResource.of(e) for e in page.items], next_cursor=page.next_cursor
        )
