"""A parsed cron schedule, and stepping through the naive wall times it matches.

`_cron.parse` makes a `CronSchedule`; this module walks it: by days and sorted fields
near the start, by croniter (on the normalised expression, never the user's text) for
sparse schedules, day by day for the day rules ``L``, ``L-N``, ``D#N`` and ``DL``. The
mapping of wall times to instants (the DST rules) is in `_cron_search`.
"""

from __future__ import annotations

import calendar
import copy
import functools
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from croniter import croniter

from domain._wallclock import ONE_SECOND

_FAST_DAYS = 31
_ONE_DAY = timedelta(days=1)


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
    # The day rules: `L-N` as N (L is 0), `D#N` as (D, N), `DL` as D. A schedule with
    # any of them is stepped day by day, never by croniter (which reads them otherwise).
    before_last: frozenset[int] = frozenset()
    nth_weekdays: frozenset[tuple[int, int]] = frozenset()
    last_weekdays: frozenset[int] = frozenset()
    day_rules: bool = False

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
                wall = self.by_days(current) if self.day_rules else self.nearby(current)
            except OverflowError:
                return
            if wall is None and self.day_rules:
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
        weekday = (day.weekday() + 1) % 7
        in_days = day.day in self.days
        in_weekdays = weekday in self.weekdays
        if self.day_rules:
            length = calendar.monthrange(day.year, day.month)[1]
            in_days = in_days or (length - day.day) in self.before_last
            in_weekdays = (
                in_weekdays
                or (weekday, (day.day + 6) // 7) in self.nth_weekdays
                or (weekday in self.last_weekdays and day.day + 7 > length)
            )
        return (in_days or in_weekdays) if self.day_or else (in_days and in_weekdays)

    def by_days(self, start: datetime) -> datetime | None:
        """The first matching wall time >= `start`, looking day by day (months that do
        not match are jumped over); None past year 9999 (OverflowError)."""
        wall = self.later_same_day(start)
        day = start.date()
        while wall is None:
            if day.month in self.months:
                day += _ONE_DAY
            else:  # the first of the next month
                day = (day.replace(day=28) + timedelta(days=4)).replace(day=1)
            if self.day_matches(day):
                wall = datetime.combine(day, self.earliest)
        return wall

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


@functools.lru_cache(maxsize=16_384)  # as `_cron.parse`'s
def _stepper(canonical: str) -> croniter[datetime]:
    return croniter(canonical, datetime(2000, 1, 1), ret_type=datetime, day_or=True)
