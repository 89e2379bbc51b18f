"""The console's calendar pages: every calendar, and one calendar's dates with the tasks
naming it (each through the use cases `/calendars` answers with)."""

from __future__ import annotations

from collections import defaultdict
from datetime import date
from typing import Annotated, Any

from litestar import Controller, Request, Response, get
from litestar.di import NamedDependency
from litestar.params import FromPath, QueryParameter

from application.calendars import CalendarService
from entrypoints.http.console.rendering import render

PAGE_SIZE = 50


def by_year(dates: tuple[date, ...]) -> list[tuple[int, list[date]]]:
    """The dates grouped by year, in order: a calendar of thousands stays readable."""
    years: defaultdict[int, list[date]] = defaultdict(list)
    for day in sorted(dates):
        years[day.year].append(day)
    return sorted(years.items())


class CalendarPages(Controller):
    path = "/"

    @get("/calendars", name="console:calendars", include_in_schema=False)
    async def calendars(
        self,
        request: Request[Any, Any, Any],
        calendars: NamedDependency[CalendarService],
        cursor: Annotated[str | None, QueryParameter(max_length=2000)] = None,
    ) -> Response[str]:
        page = await calendars.list_calendars(PAGE_SIZE, cursor or None)
        return render(
            request,
            "calendars.html",
            calendars=page.items,
            next_cursor=page.next_cursor,
            paged=cursor is not None,
            live=False,
        )

    @get("/calendars/{ref:str}", name="console:calendar", include_in_schema=False)
    async def calendar(
        self,
        request: Request[Any, Any, Any],
        ref: FromPath[str],
        calendars: NamedDependency[CalendarService],
    ) -> Response[str]:
        calendar = await calendars.get(ref)
        return render(
            request,
            "calendar.html",
            calendar=calendar,
            years=by_year(calendar.dates),
            tasks=await calendars.tasks(calendar.id),
            live=False,
        )
