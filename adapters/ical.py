"""Calendars from iCalendar (RFC 5545) text, parsed by the `icalendar` library (ADR 0009).

What counts: the dates of all-day `VEVENT`s (`DTSTART;VALUE=DATE`, through the day before
an all-day `DTEND`), `EXDATE` dates, and an all-day event repeating `RRULE:FREQ=YEARLY`
(and nothing else), which becomes a yearly `MM-DD`. Timed events say nothing about whole
days and are left out. A body that does not parse is an InvalidRequest naming its line.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

import icalendar
from icalendar.parser import Contentline
from pydantic import ValidationError

from domain.calendars import MAX_DATES, Calendar
from domain.errors import InvalidRequest
from domain.validation import field_errors

_LONGEST_EVENT_DAYS = MAX_DATES  # an event of more days could not fit a calendar


def calendar_from_ics(name: str, text: str, field: str = "body") -> Calendar:
    """The calendar `text` describes, named `name`. Raises InvalidRequest."""
    if not text.strip():
        raise InvalidRequest(
            field, "is empty: send iCalendar text (BEGIN:VCALENDAR … END:VCALENDAR)"
        )
    try:
        parsed = icalendar.Calendar.from_ical(text)
    # Malformed text makes the library raise more than ValueError (an AttributeError for
    # a VTIMEZONE without a TZID, for one): whatever it raises while parsing, the body
    # does not parse.
    except Exception as exc:
        raise _unparsable(text, field, str(exc) or type(exc).__name__) from None
    # The library keeps going past a bad line inside a component and records it there.
    for component in parsed.walk():
        for _, problem in component.errors:
            raise _unparsable(text, field, str(problem))
    dates: set[date] = set()
    yearly: set[str] = set()
    for event in parsed.walk("VEVENT"):
        start = _as_date(event.get("DTSTART"))
        for exdate in _exdates(event):
            dates.add(exdate)
        if start is None:
            continue  # a timed event, or one without a start
        rule = event.get("RRULE")
        if rule is not None:
            if dict(rule) != {"FREQ": ["YEARLY"]}:
                raise InvalidRequest(
                    field,
                    f"event {event.get('SUMMARY', '')!s:.60}: only RRULE:FREQ=YEARLY is"
                    " understood for all-day events",
                )
            yearly.add(f"{start.month:02}-{start.day:02}")
            continue
        end = _as_date(event.get("DTEND")) or start + timedelta(days=1)
        if (end - start).days > _LONGEST_EVENT_DAYS:  # never cut short without a word
            raise InvalidRequest(
                field,
                f"event {event.get('SUMMARY', '')!s:.60}: lasts {(end - start).days:,} days,"
                f" more than the {_LONGEST_EVENT_DAYS:,} dates a calendar holds",
            )
        for offset in range(max((end - start).days, 1)):
            dates.add(start + timedelta(days=offset))
    try:
        return Calendar(name=name, dates=tuple(sorted(dates)), yearly=tuple(sorted(yearly)))
    except ValidationError as exc:
        raise InvalidRequest.of(field_errors(exc, prefix=field)) from None


def _unparsable(text: str, field: str, problem: str) -> InvalidRequest:
    line = _bad_line(text)
    where = f"line {line}" if line is not None else "the calendar"
    # The library's messages may end in ": " and nothing after it.
    problem = problem.strip().removesuffix(":").strip()
    return InvalidRequest(field, f"{where} does not parse as iCalendar: {problem}")


def _as_date(prop: Any) -> date | None:
    value = getattr(prop, "dt", None)
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    return None


def _exdates(event: Any) -> list[date]:
    found: list[date] = []
    entries = event.get("EXDATE")
    if entries is None:
        return found
    for entry in entries if isinstance(entries, list) else [entries]:
        for value in getattr(entry, "dts", []):
            moment = value.dt
            found.append(moment.date() if isinstance(moment, datetime) else moment)
    return found


def _bad_line(text: str) -> int | None:
    """The 1-based number of the first (unfolded) content line that does not parse."""
    number = 0
    logical = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if raw[:1] in (" ", "\t") and logical:
            logical += raw[1:]  # a folded continuation (RFC 5545 3.1)
            continue
        if logical and not _parses(logical):
            return start
        logical, start = raw, number
    if logical and not _parses(logical):
        return start
    return None if number else 1


def _parses(line: str) -> bool:
    try:
        Contentline(line).parts()  # type: ignore[no-untyped-call]  # the library leaves it unannotated
    except Exception:
        return False
    return True
