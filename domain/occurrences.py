"""Occurrences: the one core behind `next_fire_time` and the annotated fire times.

Each trigger kind steps its *unrolled, unbounded* schedule (`unbounded_next`): wall
times mapped to instants by `read_wall`, each fire carrying the flags of that mapping.
This module then applies the calendar (domain/calendar_fires.py: exclude, or roll to
the next / previous free date) and the `start_at` / `end_at` bounds. `next_fire_time`
takes the first fire it yields; `annotate` takes `count` of them and the omissions met
on the way, so the flags and the fire times can never disagree. See docs/triggers.md,
"Calendars" and "Annotated fire times".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import date, datetime, time
from itertools import islice

from domain._wallclock import ONE_SECOND, UTC, instant, require_aware, zone
from domain.calendar_fires import fires
from domain.calendars import Calendar, calendar_for
from domain.fire_values import (
    MONTH_CLAMPED,
    ROLLED,
    AnnotatedFireTimes,
    Occurrence,
    Omission,
    OmissionReason,
    Schedule,
)
from domain.instants import truncate

__all__ = [
    "MAX_OMISSIONS_TOLD",
    "MONTH_CLAMPED",
    "ROLLED",
    "AnnotatedFireTimes",
    "Occurrence",
    "Omission",
    "OmissionReason",
    "Schedule",
    "annotate",
    "next_occurrence",
    "window",
]


def next_occurrence(
    schedule: Schedule,
    after: datetime,
    calendars: Mapping[str, Calendar] | None = None,
    omitted: list[Omission] | None = None,
) -> Occurrence | None:
    """The first fire strictly after `after` (aware), or None."""
    floor, end = window(schedule, after)
    if end is not None and floor >= end:
        return None
    ref = schedule.calendar_ref()
    if ref is None:
        found = schedule.unbounded_next(floor, omitted)
    else:
        calendar = calendar_for(ref, calendars)
        found = next(fires(schedule, floor, calendar, ref, omitted, end), None)
    return None if found is None or (end is not None and found.at > end) else found


# How many omissions the annotated fire times tell at most. Each is found by stepping
# the schedule fire by fire; past this many (a fire every second over a held date is
# 86,400 of them), the rest of the search takes the path `next_fire_time` takes, which
# skips whole held dates, and the answer says that `omitted` was cut short.
MAX_OMISSIONS_TOLD = 1000


class _Enough(Exception):
    """Raised by `_Telling` at the omission past the limit, to stop the stepping."""


class _Telling(list[Omission]):
    """The omissions met while stepping, each once (the same wall time may be met twice,
    and told with and without a calendar name), up to `limit` of them."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self._met: set[tuple[datetime, date, time, str]] = set()

    def append(self, omission: Omission) -> None:
        token = (omission.key, omission.date, omission.wall, omission.reason)
        if token in self._met:
            return
        if len(self) >= self.limit:
            raise _Enough
        self._met.add(token)
        super().append(omission)


def annotate(
    schedule: Schedule,
    after: datetime,
    count: int,
    calendars: Mapping[str, Calendar] | None = None,
    limit: int = MAX_OMISSIONS_TOLD,
) -> AnnotatedFireTimes:
    """Up to `count` fires strictly after `after`, and what did not fire between `after`
    and the last of them (within the bounds), each omission once, in time order: of
    those, the first `limit` met stepping the wall times in order, with
    `omitted_truncated` when the stepping met more (there may be more to tell)."""
    result = AnnotatedFireTimes()
    met = _Telling(limit)
    floor, end = window(schedule, after)
    if count <= 0 or (end is not None and floor >= end):
        return result
    listed = result.occurrences
    try:
        for occurrence in islice(_fires(schedule, floor, end, calendars, met), count):
            listed.append(occurrence)  # one by one: kept when the next raises _Enough
    except _Enough:
        # The fires after the last one listed are those `next_fire_time` finds: the
        # stepping path and this one agree (tests/domain/test_calendars.py).
        told = len(listed)
        start = listed[-1].at if listed else floor
        listed.extend(islice(_fires(schedule, start, end, calendars, None), count - told))
        result.omitted_truncated = len(listed) > told
    last = listed[-1].at if listed else floor
    result.omitted = sorted(
        (omission for omission in met if floor < omission.key <= last),
        key=lambda o: (o.key, o.date, o.wall),
    )
    return result


def _fires(
    schedule: Schedule,
    floor: datetime,
    end: datetime | None,
    calendars: Mapping[str, Calendar] | None,
    met: list[Omission] | None,
) -> Iterator[Occurrence]:
    """The fires strictly after `floor` up to `end`, telling `met` what did not fire on
    the way (None: tell nothing, and skip what cannot fire)."""
    ref = schedule.calendar_ref()
    if ref is None:
        current = schedule.unbounded_next(floor, met)
        while current is not None and (end is None or current.at <= end):
            yield current
            current = schedule.unbounded_next(current.at, met)
        return
    for current in fires(schedule, floor, calendar_for(ref, calendars), ref, met, end):
        if end is not None and current.at > end:
            return
        yield current


def window(schedule: Schedule, after: datetime) -> tuple[datetime, datetime | None]:
    """The instant fire times must be strictly later than, and the inclusive end."""
    if after.tzinfo is not UTC:  # UTC, what stores and clocks hand out, is aware
        require_aware(after)
    floor = truncate(after)
    start, end = schedule.bounds()
    tz = zone(schedule.timezone)
    if start is not None:
        floor = max(floor, instant(start, tz) - ONE_SECOND)
    return floor, None if end is None else instant(end, tz)
