"""Calendars from iCalendar (RFC 5545) text, parsed by the `icalendar` library (ADR 0009).

What counts: the dates of all-day `VEVENT`s (`DTSTART;VALUE=DATE`, through the day before
an all-day `DTEND`), each occurrence of their recurrence (RFC 5545 3.8.5: the `RRULE`'s
dates, expanded by adapters/ical_recurrence.py, and `RDATE`s, less `EXDATE`s), and an
all-day event repeating `RRULE:FREQ=YEARLY` (and nothing else), which becomes a yearly
`MM-DD`. Timed events say nothing about whole days and are left out. A body that does not
parse is an InvalidRequest naming its line.
"""

from __future__ import annotations

from datetime import MAXYEAR, date, datetime, timedelta
from typing import Any

import icalendar
from icalendar.parser import Contentline
from pydantic import ValidationError

from adapters.ical_recurrence import RuleProblem, TooManyDates, rule_starts
from domain.calendars import MAX_DATES, Calendar
from domain.errors import InvalidRequest
from domain.validation import field_errors

_LONGEST_EVENT_DAYS = MAX_DATES  # an event of more days could not fit a calendar
# An RRULE without UNTIL or COUNT is expanded through the end of the year this many years
# after the import (docs/api.md).
HORIZON_YEARS = 20
_TYPES = icalendar.Calendar.types_factory  # the value type the library reads a property as


def calendar_from_ics(name: str, text: str, field: str = "body", *, today: date) -> Calendar:
    """The calendar `text` describes, named `name`, read on `today` (an unbounded
    recurrence is expanded through the end of the year HORIZON_YEARS after it). Raises
    InvalidRequest."""
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
    # (A value it cannot read, such as a date 20260230, is recorded with its property's
    # name, by which its line is found.)
    for component in parsed.walk():
        for prop, problem in component.errors:
            raise _unparsable(text, field, str(problem), prop)
    horizon = date(min(today.year + HORIZON_YEARS, MAXYEAR), 12, 31)
    events = parsed.walk("VEVENT")
    # An instance moved or changed is an event of its own, with the event's UID and the
    # instance's original start as RECURRENCE-ID: the original instance is not held.
    moved: dict[str, set[date]] = {}
    for event in events:
        if (original := _as_day(event.get("RECURRENCE-ID"))) is not None:
            moved.setdefault(str(event.get("UID", "")), set()).add(original)
    dates: set[date] = set()
    yearly: set[str] = set()
    for event in events:
        if event.get("DTSTART") is None:  # RFC 5545 wants one: a typo would lose a day
            raise InvalidRequest(field, f"event {_event_name(event)}: has no DTSTART")
        start = _as_date(event.get("DTSTART"))
        if start is None:
            continue  # a timed event: its EXDATEs and RDATEs too
        taken_out: set[date] = set()
        if event.get("RECURRENCE-ID") is None:
            taken_out = moved.get(str(event.get("UID", "")), set())
        try:
            days = _event_days(event, start, horizon, yearly, taken_out)
        except _EventProblem as exc:
            raise InvalidRequest(field, f"event {_event_name(event)}: {exc}") from None
        except OverflowError:  # a day after 9999-12-31, which no date is
            raise InvalidRequest(
                field, f"event {_event_name(event)}: runs past 9999-12-31, the last date there is"
            ) from None
        dates.update(days)
    try:
        return Calendar(name=name, dates=tuple(sorted(dates)), yearly=tuple(sorted(yearly)))
    except ValidationError as exc:
        raise InvalidRequest.of(field_errors(exc, prefix=field)) from None


class _EventProblem(ValueError):
    """What is wrong with one event; the caller names the event."""


def _event_days(
    event: Any, start: date, horizon: date, yearly: set[str], moved: set[date]
) -> set[date]:
    """The dates an all-day event holds: each of its occurrences (DTSTART, the dates its
    RRULE gives, its RDATEs, less its EXDATEs and the `moved` instances), through the day
    before its DTEND. A plain
    `RRULE:FREQ=YEARLY` whose days fall on the same month-days every year adds to `yearly`
    instead, and holds for ever."""
    end = _as_date(event.get("DTEND"))  # without one, its DURATION, else a day
    if end is not None and end < start:
        raise _EventProblem(f"ends (DTEND {end}) before it starts (DTSTART {start})")
    # An all-day DTEND on its DTSTART (as some exporters write a one-day event): a day.
    length = max((end - start).days, 1) if end is not None else _duration_days(event)
    if length > _LONGEST_EVENT_DAYS:  # never cut short without a word
        raise _EventProblem(
            f"lasts {length:,} days, more than the {_LONGEST_EVENT_DAYS:,} dates a calendar holds"
        )
    rules = _listed(event.get("RRULE"))
    excluded = {*_dates(event, "EXDATE"), *moved}
    starts = {start, *_dates(event, "RDATE")}
    if len(rules) == 1 and dict(rules[0]) == {"FREQ": ["YEARLY"]} and not excluded:
        month_days = _month_days(start, length)
        if month_days is not None:
            yearly.update(month_days)
            starts.discard(start)
            rules = []
    for rule in rules:
        try:
            starts.update(rule_starts(rule, start, horizon, MAX_DATES))
        except RuleProblem as exc:
            raise _EventProblem(str(exc)) from None
        except TooManyDates:
            raise _EventProblem(_too_many(horizon)) from None
    return _covered(starts - excluded, length, horizon)


def _duration_days(event: Any) -> int:
    """The days an all-day event's DURATION (RFC 5545: its length, in place of a DTEND)
    covers, at least one; one without a DURATION (9999-12-31 has no next day to end on)."""
    duration = getattr(event.get("DURATION"), "dt", None)
    if isinstance(duration, timedelta):
        return max(duration.days, 1)
    return 1


def _covered(starts: set[date], length: int, horizon: date) -> set[date]:
    """The days of occurrences starting on `starts`, each `length` days long (they may
    overlap: a daily event of two days)."""
    runs: list[tuple[date, date]] = []  # first and last day, merged
    for first in sorted(starts):
        try:
            last = first + timedelta(days=length - 1)
        except OverflowError:
            raise _EventProblem("runs past the year 9999") from None
        if runs and (first - runs[-1][1]).days <= 1:
            runs[-1] = (runs[-1][0], max(runs[-1][1], last))
        else:
            runs.append((first, last))
    if sum((last - first).days + 1 for first, last in runs) > MAX_DATES:
        raise _EventProblem(_too_many(horizon))
    return {
        first + timedelta(days=offset)
        for first, last in runs
        for offset in range((last - first).days + 1)
    }


def _too_many(horizon: date) -> str:
    return (
        f"repeats on more than the {MAX_DATES:,} dates a calendar holds (a rule without"
        f" UNTIL or COUNT is followed through {horizon})"
    )


def _month_days(start: date, length: int) -> list[str] | None:
    """The month-days a yearly event starting on `start` holds, when they are the same in
    every year (None for a span across the end of February, which leap years move)."""
    if length == 1:
        return [f"{start.month:02}-{start.day:02}"]
    found = []
    for year in (2023, 2024):  # a common year and a leap year
        try:
            first = start.replace(year=year)
        except ValueError:
            return None  # 29 February, for several days
        found.append([f"{first + timedelta(days=offset):%m-%d}" for offset in range(length)])
    return found[0] if found[0] == found[1] else None


def _event_name(event: Any) -> str:
    summary = str(event.get("SUMMARY", "") or event.get("UID", "") or "without a SUMMARY")
    return f"{summary:.60}"


def _unparsable(text: str, field: str, problem: str, prop: str | None = None) -> InvalidRequest:
    line = _bad_line(text, prop)
    where = f"line {line}" if line is not None else "the calendar"
    # The library's messages may end in ": " and nothing after it.
    problem = problem.strip().removesuffix(":").strip()
    return InvalidRequest(field, f"{where} does not parse as iCalendar: {problem}")


def _as_date(prop: Any) -> date | None:
    value = getattr(prop, "dt", None)
    if isinstance(value, datetime):
        # `VALUE=DATE` with a TZID (which gives a date no meaning): icalendar reads a
        # date-time at midnight in that zone; the event is all-day all the same.
        params = getattr(prop, "params", None) or {}
        return value.date() if str(params.get("VALUE", "")).upper() == "DATE" else None
    return value if isinstance(value, date) else None


def _as_day(prop: Any) -> date | None:
    """A date, or a date-time's date."""
    value = getattr(prop, "dt", None)
    return value.date() if isinstance(value, datetime) else _as_date(prop)


def _listed(prop: Any) -> list[Any]:
    if prop is None:
        return []
    return list(prop) if isinstance(prop, list) else [prop]


def _dates(event: Any, name: str) -> list[date]:
    """The dates of an event's EXDATE or RDATE lines: a date-time counts as its date, a
    period (RDATE) as the date it starts."""
    found: list[date] = []
    for entry in _listed(event.get(name)):
        for value in getattr(entry, "dts", []):
            moment = value.dt
            if isinstance(moment, tuple):
                moment = moment[0]
            found.append(moment.date() if isinstance(moment, datetime) else moment)
    return found


def _bad_line(text: str, prop: str | None = None) -> int | None:
    """The 1-based number of the first (unfolded) content line that does not parse, or
    (`prop`) that is a `prop` line whose value the library cannot read."""
    number = 0
    logical = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if raw[:1] in (" ", "\t") and logical:
            logical += raw[1:]  # a folded continuation (RFC 5545 3.1)
            continue
        if logical and not _parses(logical, prop):
            return start
        logical, start = raw, number
    if logical and not _parses(logical, prop):
        return start
    return None if number else 1


def _parses(line: str, prop: str | None) -> bool:
    try:
        name, params, value = Contentline(line).parts()  # type: ignore[no-untyped-call]  # the library leaves it unannotated
        if prop is not None and str(name).upper() == prop.upper():
            kind: Any = _TYPES.for_property(name, params.get("VALUE"))
            kind.from_ical(value)
    except Exception:
        return False
    return True
