"""Cron expressions: grammar, expansion, and the search for the next fire instant.

The grammar is checked here, field by field, so that errors name the field and so that
what croniter accepts but cron does not (``L``, ``W``, ``#``, ``?``, ``H``, a year field,
descending ranges that croniter wraps around, ``5-5`` that croniter widens to the whole
field) never reaches it. croniter then steps through naive wall-clock times of a
normalised expression; the mapping of wall times to instants (the DST rules) is ours.
"""

from __future__ import annotations

import calendar
import copy
import functools
import re
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from domain._wallclock import (
    ONE_SECOND,
    UTC,
    offset_at,
    repeated_instant,
    transition_between,
    wall_instant,
)


class CronError(ValueError):
    """An expression that is not valid cron, or that can never fire."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int  # the highest value one may write (7 = Sunday for day of week)
    last: int  # where `*` and `N/step` stop
    names: Mapping[str, int]


_MONTH_NAMES = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_DAY_NAMES = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

_SECOND = _Field("second", 0, 59, 59, {})
_MINUTE = _Field("minute", 0, 59, 59, {})
_HOUR = _Field("hour", 0, 23, 23, {})
_DAY = _Field("day-of-month", 1, 31, 31, {})
_MONTH = _Field("month", 1, 12, 12, _MONTH_NAMES)
_WEEKDAY = _Field("day-of-week", 0, 7, 6, _DAY_NAMES)
_FIVE = (_MINUTE, _HOUR, _DAY, _MONTH, _WEEKDAY)
_SIX = (_SECOND, *_FIVE)

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_NUMBER = re.compile(r"[0-9]+")
_FIELD_SEPARATOR = re.compile(r"[ \t]+")
# Extensions of Quartz, Jenkins and croniter that cron does not have, with what they mean.
_EXTENSIONS = (
    (re.compile(r"#"), "'#' (nth weekday of the month)"),
    (re.compile(r"\?"), "'?' (no specific value)"),
    (re.compile(r"^[0-9]*L[0-9]*$|^LW$", re.IGNORECASE), "'L' (last day)"),
    (re.compile(r"^[0-9]+W$|^W[0-9]+$", re.IGNORECASE), "'W' (nearest weekday)"),
    (re.compile(r"^H(\(|/|$)", re.IGNORECASE), "'H' (hashed value)"),
    (re.compile(r"^R(\(|$)", re.IGNORECASE), "'R' (random value)"),
)
_FAST_DAYS = 31
_ONE_DAY = timedelta(days=1)
_FIELD_COUNT = (
    "expected 5 fields (minute hour day-of-month month day-of-week), or 6 with a leading"
    " second field"
)


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed expression: the set of values each field matches, and how days combine."""

    seconds: tuple[int, ...]  # each field sorted ascending
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    day_or: bool  # both day fields restricted: a day matches if either matches
    all_hours: bool  # hourly or finer: fires at both instants of a repeated wall time
    canonical: str  # the same schedule as plain lists, seconds last, for croniter
    earliest: time  # the first matching time of a matching day

    def walls_from(self, start: datetime) -> Iterator[datetime]:
        """Matching naive wall times >= `start`, ascending, until past year 9999.

        croniter steps through sparse schedules. A wall time later the same day, or
        within the next month for a schedule running every month, is found by checking
        days and bisecting the sorted fields instead: the same answer (a differential
        test checks it) without croniter's 50-80 us per step, which matters on the
        claim hot path.
        """
        stepper: croniter[datetime] | None = None
        current = start
        while True:
            try:
                wall = self.nearby(current)
            except OverflowError:
                return
            if wall is None:
                if stepper is None:
                    stepper = copy.copy(_stepper(self.canonical))  # croniter keeps a cursor
                try:
                    wall = stepper.get_next(datetime, current - ONE_SECOND)
                except (ValueError, OverflowError):  # CroniterBadDateError, past year 9999
                    return
            yield wall
            current = wall + ONE_SECOND

    def first_wall(self, start: datetime) -> datetime | None:
        return next(self.walls_from(start), None)

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_days = day.day in self.days
        in_weekdays = (day.weekday() + 1) % 7 in self.weekdays
        return (in_days or in_weekdays) if self.day_or else (in_days and in_weekdays)

    def nearby(self, start: datetime) -> datetime | None:
        """The first matching wall time >= `start` on its date or, when every month
        matches, on one of the next 31 days; None when it lies further."""
        wall = self.later_same_day(start)
        if wall is not None or len(self.months) < 12:
            return wall
        day = start.date()
        for _ in range(_FAST_DAYS):
            day += _ONE_DAY
            if self.day_matches(day):
                return datetime.combine(day, self.earliest)
        return None

    def later_same_day(self, start: datetime) -> datetime | None:
        """The first matching wall time >= `start` on the same date, else None."""
        if not self.day_matches(start.date()):
            return None
        hours, minutes, seconds = self.hours, self.minutes, self.seconds
        for hour in hours[bisect_left(hours, start.hour) :]:
            same_hour = hour == start.hour
            for minute in minutes[bisect_left(minutes, start.minute if same_hour else 0) :]:
                floor = start.second if same_hour and minute == start.minute else 0
                index = bisect_left(seconds, floor)
                if index < len(seconds):
                    return start.replace(hour=hour, minute=minute, second=seconds[index])
        return None


@functools.lru_cache(maxsize=1024)
def _stepper(canonical: str) -> croniter[datetime]:
    return croniter(canonical, datetime(2000, 1, 1), ret_type=datetime, day_or=True)


@functools.lru_cache(maxsize=1024)
def parse(expression: str) -> CronSchedule:
    """Parse a cron expression. Raises CronError naming the bad field."""
    text = expression.strip()
    if text.startswith("@"):
        if text.lower() not in MACROS:
            raise CronError(f"unknown macro {text!r}; use one of {', '.join(MACROS)}")
        text = MACROS[text.lower()]
    tokens = [token for token in _FIELD_SEPARATOR.split(text) if token]
    if len(tokens) not in (5, 6):
        raise CronError(f"{_FIELD_COUNT}; got {len(tokens)}")
    fields = _SIX if len(tokens) == 6 else _FIVE
    sets = [_expand(field, token) for field, token in zip(fields, tokens, strict=True)]
    if len(tokens) == 5:
        sets.insert(0, frozenset({0}))
    seconds, minutes, hours, days, months, weekdays = sets
    day_text, weekday_text = tokens[-3], tokens[-1]
    day_or = day_text != "*" and weekday_text != "*"
    if not day_or:
        _check_days_exist(days, months)
    return CronSchedule(
        seconds=tuple(sorted(seconds)),
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=days,
        months=months,
        weekdays=weekdays,
        day_or=day_or,
        all_hours=len(hours) == 24,
        canonical=_canonical(
            seconds, minutes, hours, days, months, weekdays, day_or, has_seconds=len(tokens) == 6
        ),
        earliest=time(min(hours), min(minutes), min(seconds)),
    )


def _expand(field: _Field, token: str) -> frozenset[int]:
    values: set[int] = set()
    for item in token.split(","):
        values.update(_expand_item(field, item))
    if field is _WEEKDAY:
        values = {0 if value == 7 else value for value in values}
    return frozenset(values)


def _expand_item(field: _Field, item: str) -> range:
    if not item:
        raise CronError(f"{field.name} field: empty item in list")
    for pattern, meaning in _EXTENSIONS:
        if pattern.search(item):
            raise CronError(f"{field.name} field: {item!r} uses {meaning}, which cron lacks")
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not _NUMBER.fullmatch(step_text) or int(step_text) == 0:
            raise CronError(f"{field.name} field: step {step_text!r} is not a positive number")
        step = int(step_text)
    if base == "*":
        return range(field.low, field.last + 1, step)
    if "-" in base:
        first_text, _, last_text = base.partition("-")
        if not first_text or not last_text or "-" in last_text:
            raise CronError(f"{field.name} field: {item!r} is not a valid range")
        first = _value(field, first_text)
        last = _value(field, last_text)
        if field is _WEEKDAY and last_text.lower() == "sun" and first > 0:
            last = 7  # SUN closing a range is the Sunday that ends the week: FRI-SUN
        if first > last:
            raise CronError(
                f"{field.name} field: range {base} runs downward; ranges must run upward"
                f" (write {first_text}-{field.high},{field.low}-{last_text} to wrap)"
            )
        return range(first, last + 1, step)
    first = _value(field, base)
    # N/step runs to the field's end; 7/step in day of week is Sunday alone.
    return range(first, (max(field.last, first) if slash else first) + 1, step)


def _value(field: _Field, text: str) -> int:
    if _NUMBER.fullmatch(text):
        value = int(text)
        if not field.low <= value <= field.high:
            raise CronError(f"{field.name} field: {value} is out of range {field.low}-{field.high}")
        return value
    name = text.lower()
    if name in field.names:
        return field.names[name]
    kind = "a number or a name" if field.names else "a number"
    raise CronError(f"{field.name} field: {text!r} is not {kind}")


def _check_days_exist(days: frozenset[int], months: frozenset[int]) -> None:
    """Reject day-of-month values no chosen month has (February counts 29 days)."""
    longest = {month: calendar.monthrange(2024, month)[1] for month in months}
    if any(day <= longest[month] for day in days for month in months):
        return
    day_list = ", ".join(str(day) for day in sorted(days))
    month_list = ", ".join(calendar.month_name[month] for month in sorted(months))
    which = f"days {day_list} never occur" if len(days) > 1 else f"day {day_list} never occurs"
    raise CronError(
        f"day-of-month field: {which} in {month_list}, so the expression can never fire"
    )


def _canonical(
    seconds: frozenset[int],
    minutes: frozenset[int],
    hours: frozenset[int],
    days: frozenset[int],
    months: frozenset[int],
    weekdays: frozenset[int],
    day_or: bool,
    *,
    has_seconds: bool,
) -> str:
    """The schedule written so that croniter reads exactly our semantics.

    A full set is written `*`. Under the either-day rule a full day field makes every
    day match, so both day fields become `*`; otherwise croniter applies the same rule
    when both day fields are lists (it decides by its own expansion, which is why we
    never hand it the user's text).
    """

    def written(values: frozenset[int], size: int) -> str:
        return "*" if len(values) == size else ",".join(str(v) for v in sorted(values))

    day, weekday = written(days, 31), written(weekdays, 7)
    if day_or and "*" in (day, weekday):
        day = weekday = "*"
    fields = [written(minutes, 60), written(hours, 24), day, written(months, 12), weekday]
    if has_seconds:
        fields.append(written(seconds, 60))
    return " ".join(fields)


# A neighbourhood wider than any UTC-offset shift in tzdata (24 h, Alaska 1867 and Samoa
# 2011). tzdata never puts two transitions of one zone within 95 h of each other, so a
# window of 2 * _NEAR holds at most one transition and its two ends show both offsets.
_NEAR = timedelta(hours=27)


def next_fire(schedule: CronSchedule, tz: ZoneInfo, after: datetime) -> datetime | None:
    """The first fire instant strictly after the aware UTC whole-second `after`.

    Wall times are stepped in ascending order; their instants are not, around a
    transition. So the search also looks at wall times just below the wall time of
    `after` when a transition is near, and keeps stepping after a candidate until no
    later wall time can map to an earlier instant.
    """
    local = after.astimezone(tz)
    wall_after = local.replace(tzinfo=None)
    offset_after = local.utcoffset()
    assert offset_after is not None
    best = _early_candidate(schedule, tz, after, wall_after, offset_after)
    ceiling = _offset_ceiling(tz, best) if best is not None else None
    lowest = wall_after + ONE_SECOND  # the lowest wall time not yet looked at
    walls = schedule.walls_from(lowest)
    while True:
        if best is not None and ceiling is not None and _utc(lowest - ceiling) >= best:
            return best  # every wall time from here on maps at or after `best`
        wall = next(walls, None)
        if wall is None:
            return best
        for moment in _instants(schedule, tz, wall):
            if moment > after and (best is None or moment < best):
                best = moment
                ceiling = _offset_ceiling(tz, best)
        lowest = wall + ONE_SECOND


def _early_candidate(
    schedule: CronSchedule,
    tz: ZoneInfo,
    after: datetime,
    wall_after: datetime,
    offset_after: timedelta,
) -> datetime | None:
    """The best fire instant > `after` among wall times <= the wall time of `after`.

    Only two kinds of earlier wall time can fire later: the skipped wall times of a gap
    that `after` lies within (read with the earlier offset, they land up to a gap's length
    past the transition), and, for hourly-or-finer schedules, the second passage of a
    repeated hour that is about to start.
    """
    offset_before = offset_at(tz, after, -_NEAR)
    offset_ahead = offset_at(tz, after, _NEAR)
    naive_after = after.replace(tzinfo=None)
    if offset_before < offset_after:  # the clock jumped forward less than _NEAR ago
        wall = schedule.first_wall(naive_after + offset_before + ONE_SECOND)
        if wall is not None and wall <= wall_after:
            moment = wall_instant(wall, tz)
            if moment > after:
                return moment
    if schedule.all_hours and offset_ahead < offset_after:  # a repeated hour is coming
        change = transition_between(tz, after, after + _NEAR)
        first_repeat = change.replace(tzinfo=None) + offset_ahead
        if first_repeat <= wall_after:
            wall = schedule.first_wall(first_repeat)
            if wall is not None and wall <= wall_after:
                return _utc(wall - offset_ahead)
    return None


def _offset_ceiling(tz: ZoneInfo, best: datetime) -> timedelta:
    """The largest offset a wall time mapping just before `best` can have been read with.

    A later wall time beats `best` only by being read with a larger offset, in force
    at most a shift (< _NEAR) before `best`, or just before a gap that ended there.
    """
    return max(offset_at(tz, best, -2 * _NEAR), offset_at(tz, best))


def _instants(schedule: CronSchedule, tz: ZoneInfo, wall: datetime) -> Iterator[datetime]:
    yield wall_instant(wall, tz)
    if schedule.all_hours:
        repeat = repeated_instant(wall, tz)
        if repeat is not None:
            yield repeat


def _utc(naive: datetime) -> datetime:
    return naive.replace(tzinfo=UTC)
