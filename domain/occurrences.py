"""Occurrences: the one core behind `next_fire_time` and the annotated fire times.

Each trigger kind steps its *unrolled, unbounded* schedule (`unbounded_next`): wall
times mapped to instants by `read_wall`, each fire carrying the flags of that mapping.
This module then applies the calendar (exclude, or roll to the next / previous free
date) and the `start_at` / `end_at` bounds. `next_fire_time` takes the first fire it
yields; `annotate` takes `count` of them and the omissions met on the way, so the flags
and the fire times can never disagree. See docs/triggers.md, "Calendars" and "Annotated
fire times".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Literal, Protocol

from domain._wallclock import ONE_SECOND, UTC, Reading, instant, require_aware, zone
from domain.calendars import Calendar, CalendarRef, calendar_for
from domain.instants import truncate

ROLLED = "rolled"
MONTH_CLAMPED = "month_clamped"
OmissionReason = Literal["dst_gap", "excluded", "rolled_away"]
# How far back the search for the unrolled fire time before `after` looks: a roll moves
# a fire time at most ROLL_LIMIT_DAYS, so one older than this cannot roll past `after`.
# (2**20 minutes, about 728 days: the longest of the look backs doubling from a minute
# that fit in twice 368 days, which is what the search looked back before it started
# from the schedule's period; the reach stays the same so that no fire time changes.)
_MINUTE = timedelta(minutes=1)
_REACH = _MINUTE * 2**20


@dataclass(frozen=True, slots=True)
class Occurrence:
    """A fire time: the instant, the naive wall time it was named by, how it got there."""

    at: datetime
    wall: datetime
    flags: tuple[str, ...] = ()
    rolled_from: date | None = None


@dataclass(frozen=True, slots=True)
class Omission:
    """A wall-time occurrence that does not fire. `key` places it in time: the instant it
    would have had (under the `shift` gap rule, before any roll)."""

    key: datetime
    date: date
    wall: time
    reason: OmissionReason
    calendar: str | None = None


@dataclass(slots=True)
class AnnotatedFireTimes:
    occurrences: list[Occurrence] = field(default_factory=list)
    omitted: list[Omission] = field(default_factory=list)


class Schedule(Protocol):
    """What a trigger kind provides to this module."""

    @property
    def timezone(self) -> str: ...

    def bounds(self) -> tuple[datetime | None, datetime | None]: ...

    def calendar_ref(self) -> CalendarRef | None: ...

    def unbounded_next(self, floor: datetime, omitted: list[Omission] | None) -> Occurrence | None:
        """The first unrolled fire strictly after the UTC whole-second `floor`,
        ignoring `start_at` / `end_at` (an anchor is not a bound)."""
        ...

    def read_on(self, day: date, wall: time) -> tuple[Reading, ...]:
        """The instants (and flags) of wall time `wall` on `day`, under the DST policy."""
        ...


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


def annotate(
    schedule: Schedule,
    after: datetime,
    count: int,
    calendars: Mapping[str, Calendar] | None = None,
) -> AnnotatedFireTimes:
    """Up to `count` fires strictly after `after`, and what did not fire between `after`
    and the last of them (within the bounds), each omission once, in time order."""
    result = AnnotatedFireTimes()
    met: list[Omission] = []
    floor, end = window(schedule, after)
    ref = schedule.calendar_ref()
    if count <= 0 or (end is not None and floor >= end):
        return result
    if ref is None:
        current: Occurrence | None = schedule.unbounded_next(floor, met)
        while current is not None and (end is None or current.at <= end):
            result.occurrences.append(current)
            if len(result.occurrences) == count:
                break
            current = schedule.unbounded_next(current.at, met)
    else:
        for current in fires(schedule, floor, calendar_for(ref, calendars), ref, met, end):
            if end is not None and current.at > end:
                break
            result.occurrences.append(current)
            if len(result.occurrences) == count:
                break
    last = result.occurrences[-1].at if result.occurrences else floor
    seen: set[tuple[datetime, date, time, str]] = set()
    for omission in sorted(met, key=lambda o: (o.key, o.date, o.wall)):
        token = (omission.key, omission.date, omission.wall, omission.reason)
        if floor < omission.key <= last and token not in seen:
            seen.add(token)
            result.omitted.append(omission)
    return result


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


def fires(
    schedule: Schedule,
    floor: datetime,
    calendar: Calendar,
    ref: CalendarRef,
    omitted: list[Omission] | None,
    end: datetime | None = None,
) -> Iterator[Occurrence]:
    """The calendared schedule after `floor`, ascending, each instant once; unbounded,
    but for the `exclude` search, which need not look past `end` for a free fire."""
    if calendar.holds_every_day():
        return iter(())
    if ref.policy == "exclude":
        return _excluding(schedule, floor, calendar, omitted, end)
    if ref.policy == "next_business_day":
        return _rolling_forward(schedule, floor, calendar, omitted)
    return _rolling_back(schedule, floor, calendar, omitted)


def _excluding(
    schedule: Schedule,
    floor: datetime,
    calendar: Calendar,
    omitted: list[Omission] | None,
    end: datetime | None,
) -> Iterator[Occurrence]:
    """The fires not on a calendar date. Past an excluded one, the next free fire is
    looked for date by date (`_first_free`), and when there is none the search ends;
    when annotating, the excluded fires up to it are then stepped one by one, to be told."""
    current = schedule.unbounded_next(floor, omitted)
    free: Occurrence | None = None  # annotating: the next free fire, once looked for
    while current is not None:
        if current.wall.date() not in calendar:
            yield current
        elif omitted is None:
            current = _first_free(schedule, current, calendar, end)
            if current is None or (end is not None and current.at > end):
                return
            continue
        else:
            if free is None or current.at > free.at:
                free = _first_free(schedule, current, calendar, end)
                if free is None or (end is not None and free.at > end):
                    return
            _tell(omitted, current, "excluded", calendar)
        current = schedule.unbounded_next(current.at, omitted)


def _first_free(
    schedule: Schedule, current: Occurrence, calendar: Calendar, end: datetime | None
) -> Occurrence | None:
    """The first fire from `current` on whose date the calendar does not hold, skipping
    the rest of each excluded date at once; None when there is none up to the calendar's
    `search_limit` (docs/triggers.md, "Calendars"). Past `end`, the first fire found is
    returned as it is: the caller ends there."""
    tz = zone(schedule.timezone)
    limit = calendar.search_limit(current.wall.date())
    found: Occurrence | None = current
    while found is not None:
        day = found.wall.date()
        if day not in calendar or (end is not None and found.at > end):
            return found
        if day >= limit:
            return None
        try:  # the last second of `day` (a midnight in a gap reads as the transition)
            end_of_day = instant(datetime.combine(day + timedelta(days=1), time()), tz)
        except OverflowError:
            return None
        found = schedule.unbounded_next(max(found.at, end_of_day - ONE_SECOND), None)
    return None


def _rolling_forward(
    schedule: Schedule, floor: datetime, calendar: Calendar, omitted: list[Omission] | None
) -> Iterator[Occurrence]:
    """A fire on a calendar date moves to the same wall time on the next free date, but
    never past the unrolled fire after it (there it fires once, as that one)."""
    memo = _Memo(schedule)
    current = _last_at_or_before(memo, floor) or schedule.unbounded_next(floor, omitted)
    last = floor
    while current is not None:
        following = (
            memo(current.at) if omitted is None else schedule.unbounded_next(current.at, omitted)
        )
        if current.wall.date() not in calendar:
            if current.at > last:
                yield current
                last = current.at
        else:
            kept = False
            for rolled in _rolled(schedule, current, calendar, 1, omitted):
                if following is not None and rolled.at > following.at:
                    continue
                kept = True
                # Landing on the next unrolled fire time: it fires once, as that one.
                merged = (
                    following is not None
                    and rolled.at == following.at
                    and following.wall.date() not in calendar
                )
                if rolled.at > last and not merged:
                    yield rolled
                    last = rolled.at
            if not kept and current.at > floor:
                _tell(omitted, current, "rolled_away", calendar)
        current = following


def _rolling_back(
    schedule: Schedule, floor: datetime, calendar: Calendar, omitted: list[Omission] | None
) -> Iterator[Occurrence]:
    """A fire on a calendar date moves to the same wall time on the previous free date,
    but never before the unrolled fire before it (there it fires once, as that one)."""
    current = schedule.unbounded_next(floor, omitted)
    # The unrolled fire before the first: a roll landing before it is rolled away. Only
    # an annotation needs it (a roll to at or before `floor` is never yielded anyway).
    previous: datetime | None = None
    if omitted is not None:
        before = _last_at_or_before(_Memo(schedule), floor)
        previous = None if before is None else before.at
    last = floor
    while current is not None:
        if current.wall.date() not in calendar:
            if current.at > last:
                yield current
                last = current.at
        else:
            kept = False
            for rolled in _rolled(schedule, current, calendar, -1, omitted):
                if previous is None and rolled.at <= floor:
                    kept = True  # rolled to before the span: not ours to report
                    continue
                if previous is not None and rolled.at < previous:
                    continue
                kept = True
                if rolled.at > last:
                    yield rolled
                    last = rolled.at
            if not kept:
                _tell(omitted, current, "rolled_away", calendar)
        previous = current.at
        current = schedule.unbounded_next(current.at, omitted)


def _rolled(
    schedule: Schedule,
    occurrence: Occurrence,
    calendar: Calendar,
    step: int,
    omitted: list[Omission] | None,
) -> list[Occurrence]:
    """`occurrence` at its wall time on the nearest free date (step 1 later, -1 earlier),
    by the DST policy on that date; [] when there is none within the roll limit."""
    day = calendar.free_date(occurrence.wall.date(), step)
    if day is None:
        return []
    wall = datetime.combine(day, occurrence.wall.time())
    readings = schedule.read_on(day, wall.time())
    if not readings and omitted is not None:
        moment = wall.replace(tzinfo=zone(schedule.timezone), fold=0).astimezone(UTC)
        omitted.append(Omission(moment, day, wall.time(), "dst_gap", calendar.name))
    # How the original date came about stays true of the rolled fire; its DST flags are
    # those of the new date.
    kept = tuple(flag for flag in occurrence.flags if flag == MONTH_CLAMPED)
    return [
        Occurrence(moment, wall, (*kept, *flags, ROLLED), occurrence.wall.date())
        for moment, flags in readings
    ]


class _Memo:
    """`unbounded_next` without omissions, each floor searched once: the look back and
    the roll that follows it ask for the same fires."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self._found: dict[datetime, Occurrence | None] = {}

    def __call__(self, floor: datetime) -> Occurrence | None:
        if floor not in self._found:
            self._found[floor] = self.schedule.unbounded_next(floor, None)
        return self._found[floor]


def _last_at_or_before(memo: _Memo, floor: datetime) -> Occurrence | None:
    """The last unrolled fire at or before `floor` within _REACH, found by looking back
    ever further (doubling) and then stepping forward. The first look back is the gap
    between the two fires after `floor`: a regular schedule's period, which finds the
    fire before at once, where starting from a minute took a dozen searches (a daily
    cron). Whatever the first look back, the answer is the same: the last fire at or
    before `floor`, if there is one within _REACH."""
    try:
        floor - _REACH
    except OverflowError:  # near year 1: look back as the reach allows, from a minute
        return _last_from(memo, floor, _MINUTE)
    return _last_from(memo, floor, _first_look_back(memo, floor))


def _first_look_back(memo: _Memo, floor: datetime) -> timedelta:
    after = memo(floor)
    following = None if after is None else memo(after.at)
    if after is None or following is None:
        return _MINUTE
    return min(max(following.at - after.at, _MINUTE), _REACH)


def _last_from(memo: _Memo, floor: datetime, back: timedelta) -> Occurrence | None:
    while True:
        try:
            candidate = memo(floor - back)
        except OverflowError:
            return None
        if candidate is not None and candidate.at <= floor:
            while (later := memo(candidate.at)) is not None and later.at <= floor:
                candidate = later
            return candidate
        if back >= _REACH:
            return None
        back = min(2 * back, _REACH)


def _tell(
    omitted: list[Omission] | None,
    occurrence: Occurrence,
    reason: OmissionReason,
    calendar: Calendar,
) -> None:
    if omitted is not None:
        wall = occurrence.wall
        omitted.append(Omission(occurrence.at, wall.date(), wall.time(), reason, calendar.name))
