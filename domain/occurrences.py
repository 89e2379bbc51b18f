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

from collections.abc import Mapping
from datetime import date, datetime, time

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
    """The distinct omissions met while stepping, up to `limit` of them."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self._met: set[Omission] = set()

    def append(self, omission: Omission) -> None:
        if omission in self._met:
            return
        if len(self) >= self.limit:
            raise _Enough
        self._met.add(omission)
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
    try:
        _list(schedule, floor, end, count, calendars, met, result.occurrences)
    except _Enough:
        # The fires after the last one listed are those `next_fire_time` finds: the
        # stepping path and this one agree (tests/domain/test_calendars.py).
        start = result.occurrences[-1].at if result.occurrences else floor
        listed = len(result.occurrences)
        _list(schedule, start, end, count - listed, calendars, None, result.occurrences)
        result.omitted_truncated = len(result.occurrences) > listed
    last = result.occurrences[-1].at if result.occurrences else floor
    seen: set[tuple[datetime, date, time, str]] = set()
    for omission in sorted(met, key=lambda o: (o.key, o.date, o.wall)):
        token = (omission.key, omission.date, omission.wall, omission.reason)
        if floor < omission.key <= last and token not in seen:
            seen.add(token)
            result.omitted.append(omission)
    return result


def _list(
    schedule: Schedule,
    floor: datetime,
    end: datetime | None,
    count: int,
    calendars: Mapping[str, Calendar] | None,
    met: list[Omission] | None,
    listed: list[Occurrence],
) -> None:
    """Append to `listed` up to `count` fires strictly after `floor`, telling `met`
    what did not fire on the way (None: tell nothing, skip what cannot fire)."""
    if count <= 0:
        return
    ref = schedule.calendar_ref()
    found = 0
    if ref is None:
        current: Occurrence | None = schedule.unbounded_next(floor, met)
        while current is not None and (end is None or current.at <= end):
            listed.append(current)
            found += 1
            if found == count:
                break
            current = schedule.unbounded_next(current.at, met)
        return
    for current in fires(schedule, floor, calendar_for(ref, calendars), ref, met, end):
        if end is not None and current.at > end:
            break
        listed.append(current)
        found += 1
        if found == count:
            break


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
