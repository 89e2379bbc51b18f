"""Applying a calendar to a trigger's unrolled schedule: `exclude` drops the fires on
its dates, `next_business_day` / `previous_business_day` roll them to the nearest free
date (docs/triggers.md, "Calendars"). Where nothing is to be told of what does not
fire, whole dates that cannot fire are skipped at once; an `exclude` search ends
(`Calendar.search_limit`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from domain._wallclock import ONE_SECOND, UTC, instant, zone
from domain.calendars import Calendar, CalendarRef
from domain.fire_values import MONTH_CLAMPED, ROLLED, Occurrence, Omission, OmissionReason, Schedule
from domain.gap_walls import HeldGapWalls, told_key

# How far back the search for the unrolled fire time before `after` looks: a roll moves
# a fire time at most ROLL_LIMIT_DAYS, so one older than this cannot roll past `after`.
# (2**20 minutes, about 728 days: the longest of the look backs doubling from a minute
# that fit in twice 368 days, which is what the search looked back before it started
# from the schedule's period; the reach stays the same so that no fire time changes.)
_MINUTE = timedelta(minutes=1)
_REACH = _MINUTE * 2**20


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
    # A roll moves a held date's wall times, those a DST gap skips there included.
    rolling = HeldGapWalls(schedule, calendar)
    if ref.policy == "next_business_day":
        return _rolling_forward(rolling, floor, calendar, omitted)
    return _rolling_back(rolling, floor, calendar, omitted)


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
        current = _shown(schedule, current, calendar)
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


def _shown(schedule: Schedule, occurrence: Occurrence, calendar: Calendar) -> Occurrence:
    """`occurrence` as the calendar sees it. One instant may be named by two wall times
    on two dates (a DST gap across midnight: Saturday 23:30 shifted through the gap is
    Sunday 00:30), and the occurrence shows the earlier one; when that one's date is
    held and the instant's own wall time is a fire time of the schedule on a free date,
    the instant fires, as that wall time (docs/triggers.md, "Calendars")."""
    day = occurrence.wall.date()
    if day not in calendar:
        return occurrence
    own = occurrence.at.astimezone(zone(schedule.timezone)).replace(tzinfo=None)
    if own.date() == day or own.date() in calendar or not schedule.names(own):
        return occurrence
    for moment, flags in schedule.read_on(own.date(), own.time()):
        if moment == occurrence.at:
            return Occurrence(moment, own, flags)
    return occurrence


def _first_free(
    schedule: Schedule, current: Occurrence, calendar: Calendar, end: datetime | None
) -> Occurrence | None:
    """The first fire from `current` on whose date the calendar does not hold, skipping
    the rest of each excluded date at once; None when there is none up to the calendar's
    `search_limit` (docs/triggers.md, "Calendars"). Past `end`, the first fire found is
    returned as it is: the caller ends there."""
    limit = calendar.search_limit(current.wall.date())
    found: Occurrence | None = current
    while found is not None:
        found = _shown(schedule, found, calendar)
        day = found.wall.date()
        if day not in calendar or (end is not None and found.at > end):
            return found
        if day >= limit:
            return None
        found = _after_its_date(schedule, found)
    return None


def _last_second_of(schedule: Schedule, day: date) -> datetime | None:
    """The instant before `day`'s next midnight (a midnight in a gap reads as the
    transition); None past the year 9999."""
    try:
        midnight = instant(
            datetime.combine(day + timedelta(days=1), time()), zone(schedule.timezone)
        )
    except OverflowError:
        return None
    return midnight - ONE_SECOND


def _after_its_date(schedule: Schedule, occurrence: Occurrence) -> Occurrence | None:
    """The first unrolled fire after the last second of `occurrence`'s date."""
    end = _last_second_of(schedule, occurrence.wall.date())
    return None if end is None else schedule.unbounded_next(max(occurrence.at, end), None)


def _rolling_forward(
    schedule: Schedule, floor: datetime, calendar: Calendar, omitted: list[Omission] | None
) -> Iterator[Occurrence]:
    """A fire on a calendar date moves to the same wall time on the next free date, but
    never past the unrolled fire after it (there it fires once, as that one)."""
    memo = _Memo(schedule)
    current = _last_at_or_before(memo, floor) or schedule.unbounded_next(floor, omitted)
    last = floor
    while current is not None:
        current = _shown(schedule, current, calendar)
        if omitted is None and (skipped := _rolled_past_forward(memo, current, calendar)):
            current = skipped.to
            continue
        following = (
            memo(current.at) if omitted is None else schedule.unbounded_next(current.at, omitted)
        )
        if following is not None:
            following = _shown(schedule, following, calendar)
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
                elif merged and current.at > floor:
                    _tell(omitted, current, "merged", calendar)
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
    previous_day: date | None = None
    while current is not None:
        current = _shown(schedule, current, calendar)
        if omitted is None and _rolled_past_back(current, previous_day, calendar):
            previous, previous_day = current.at, current.wall.date()
            current = _after_its_date(schedule, current)
            continue
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
                elif rolled.at == previous:  # landed on the fire before: it fires once
                    _tell(omitted, current, "merged", calendar)
            if not kept:
                _tell(omitted, current, "rolled_away", calendar)
        previous, previous_day = current.at, current.wall.date()
        current = schedule.unbounded_next(current.at, omitted)


# Skipping what cannot fire, date by date, when nothing is to be told of it (a dense
# schedule over months of held dates stepped every fire for seconds to minutes).


@dataclass(frozen=True, slots=True)
class _Skip:
    to: Occurrence | None  # the unrolled fire to go on from


def _rolled_past_forward(memo: _Memo, current: Occurrence, calendar: Calendar) -> _Skip | None:
    """Under `next_business_day`: where to go on from `current`, when it cannot fire.
    A fire on a held date rolls to the first free date after it, at its wall time; that
    lands past the next unrolled fire whenever the next is on an earlier date (the same
    one, or a held one between), and there is no roll at all without a free date within
    the roll limit. So a held date's fires are skipped whole, but the last of a date
    followed by a free one, which may roll there."""
    schedule, day = memo.schedule, current.wall.date()
    if day not in calendar:
        return None
    free = calendar.free_date(day, 1)
    end = _last_second_of(schedule, day)
    if end is None:
        return None
    after = schedule.unbounded_next(max(current.at, end), None)
    if free is None or (after is not None and after.wall.date() < free):
        return _Skip(after)
    last = _last_at_or_before(memo, end)
    if last is not None and last.at > current.at and last.wall.date() == day:
        return _Skip(last)
    return None


def _rolled_past_back(current: Occurrence, previous_day: date | None, calendar: Calendar) -> bool:
    """Under `previous_business_day`: whether no fire left on `current`'s held date can
    fire. Each rolls to the last free date before it, at its wall time; that lands
    before the previous unrolled fire whenever the previous is on a later date than
    that free one (a held date of the same run), and there is no roll at all without a
    free date within the roll limit."""
    day = current.wall.date()
    if day not in calendar:
        return False
    free = calendar.free_date(day, -1)
    return free is None or (previous_day is not None and previous_day > free)


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
        key = told_key(occurrence)
        omitted.append(Omission(key, wall.date(), wall.time(), reason, calendar.name))
