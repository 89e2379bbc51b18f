"""Calendars: named sets of local dates that triggers exclude or roll around.

A calendar is a value. The domain never reads a store: a trigger that names a calendar
is handed it (`next_fire_time(after, calendars={name: calendar})`). See docs/triggers.md,
"Calendars".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from typing import Annotated, Any, Literal, Self
from uuid import UUID

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic_core import PydanticCustomError

from domain.names import NAME_PATTERN, unreachable_name
from domain.read_back import READ_BACK, read_back

MAX_DATES = 10_000
# How far a roll looks for a date that is not in the calendar (docs/triggers.md).
ROLL_LIMIT_DAYS = 366
# How far past its last listed date (or past where it starts, if later) an `exclude`
# search looks for a fire time on a free date before it concludes there is none left
# (docs/triggers.md, "Calendars"): without a limit, a weekly trigger on an excluded
# weekday stepped through every week to the year 9999, for seconds to minutes.
EXCLUDE_SEARCH_YEARS = 100
WEEKDAY_NAMES = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")  # date.weekday() order
# How many answers a calendar keeps (`_DateIndex`): a few decades of dates, bounded so
# that a long-lived calendar asked about ever more dates stays small.
_INDEX_LIMIT = 20_000

CalendarPolicy = Literal["exclude", "next_business_day", "previous_business_day"]

_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_MONTH_DAY = re.compile(r"([0-9]{2})-([0-9]{2})")


class CalendarMissing(ValueError):
    """A trigger names a calendar that `next_fire_time` was not given: a programming
    error of the caller (the application hands in every calendar its tasks name)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"the trigger names calendar {name!r}, which was not given")
        self.name = name


def _iso_date(value: object) -> object:
    if isinstance(value, date):
        return value
    if not isinstance(value, str) or not _DATE.fullmatch(value):
        raise PydanticCustomError("calendar_date", "must be a date written YYYY-MM-DD")
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise PydanticCustomError("calendar_date", f"{value!r} is not a date: {exc}") from exc


def _month_day(value: object) -> str:
    match = _MONTH_DAY.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise PydanticCustomError("calendar_yearly", "must be a month and day written MM-DD")
    try:
        date(2024, int(match.group(1)), int(match.group(2)))  # 2024 is a leap year
    except ValueError as exc:
        raise PydanticCustomError("calendar_yearly", f"{value!r} is no day of the year") from exc
    return match.group(0)


def _weekday(value: object) -> str:
    if not isinstance(value, str) or value.upper() not in WEEKDAY_NAMES:
        raise PydanticCustomError("calendar_weekday", f"must be one of {', '.join(WEEKDAY_NAMES)}")
    return value.upper()


CalendarDate = Annotated[date, BeforeValidator(_iso_date)]
# Every month and day of a leap year, as the schema's pattern.
_MONTH_DAY_PATTERN = (
    "^((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
    "|02-(0[1-9]|[12][0-9]))$"
)
MonthDay = Annotated[
    str,
    BeforeValidator(_month_day),
    WithJsonSchema({"type": "string", "pattern": _MONTH_DAY_PATTERN}),
]
# A weekday's name in any case; the schema says so with a pattern (JSON Schema has no
# case-insensitive enum), so that a client generated from it accepts what we accept.
_WEEKDAY_PATTERN = (
    "^(" + "|".join("".join(f"[{c}{c.lower()}]" for c in name) for name in WEEKDAY_NAMES) + ")$"
)
WeekdayName = Annotated[
    str,
    BeforeValidator(_weekday),
    WithJsonSchema({"type": "string", "pattern": _WEEKDAY_PATTERN}),
]


class Calendar(BaseModel):
    """A set of local dates: explicit `dates`, `yearly` month-days (`02-29` only in leap
    years, since other years have no such date) and every one of the `weekdays`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    description: str | None = Field(default=None, max_length=2000)
    dates: tuple[CalendarDate, ...] = ()
    yearly: tuple[MonthDay, ...] = Field(default=(), max_length=366)
    weekdays: tuple[WeekdayName, ...] = Field(default=(), max_length=7)

    _index: _DateIndex = PrivateAttr()

    @field_validator("dates", mode="before")
    @classmethod
    def _not_too_many(cls, value: Any) -> Any:
        if isinstance(value, list | tuple) and len(value) > MAX_DATES:
            raise PydanticCustomError(
                "calendar_too_many_dates",
                f"at most {MAX_DATES:,} dates, got {len(value):,}",
            )
        # A before validator hands pydantic a Python value, which strict validation (a
        # request's, entrypoints/http/body.py) reads as Python: a tuple, not a list.
        return tuple(value) if isinstance(value, list) else value

    @field_validator("name")
    @classmethod
    def _reachable(cls, value: str, info: ValidationInfo) -> str:
        # No UUID, no dots alone (see domain/names.py). Only a calendar as a client sends
        # it: a stored one was checked when written, or predates the rule.
        if cls is Calendar and not read_back(info) and (problem := unreachable_name(value)):
            raise ValueError(problem)
        return value

    @field_validator("dates", "yearly", "weekdays")
    @classmethod
    def _each_once(cls, value: tuple[Any, ...]) -> tuple[Any, ...]:
        # A calendar is a set of dates: a repeat (also "mon" beside "MON") says nothing
        # more, and is kept once, where it first came.
        return tuple(dict.fromkeys(value))

    def model_post_init(self, context: Any, /) -> None:
        self._index = _DateIndex(
            frozenset(self.dates),
            frozenset((int(text[:2]), int(text[3:])) for text in self.yearly),
            frozenset(WEEKDAY_NAMES.index(name) for name in self.weekdays),
        )

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy validated anew: the date sets are derived from the fields, so a copy
        with changed fields must derive them again (pydantic's copy would not)."""
        return self.model_validate({**dict(self), **(update or {})})

    def __contains__(self, day: object) -> bool:
        return isinstance(day, date) and self._index.holds(day)

    def holds_every_day(self) -> bool:
        """True when no date from now on is free: every weekday, or every day of the year.
        (Explicit dates end somewhere, so they alone never hold every day.)"""
        index = self._index
        return len(index.weekdays) == 7 or len(index.yearly) == 366

    def free_date(self, day: date, step: int) -> date | None:
        """The nearest date after (step 1) or before (step -1) `day` not in the calendar,
        within ROLL_LIMIT_DAYS; None when there is none (or the calendar of dates ends)."""
        return self._index.free_date(day, step)

    def search_limit(self, day: date) -> date:
        """The last date an `exclude` search from `day` looks at for a fire time on a
        free date: EXCLUDE_SEARCH_YEARS past `day` or the last listed date, the later."""
        start = max(day, self._index.last_date)
        try:
            return start.replace(year=start.year + EXCLUDE_SEARCH_YEARS, day=min(start.day, 28))
        except ValueError:  # past the year 9999
            return date.max


class _DateIndex:
    """A calendar's dates as sets, and what was asked of them: a re-plan of 10,000 tasks
    asks about the same few dates 10,000 times (the calendar is immutable, so the answers
    hold for its life)."""

    __slots__ = ("_free", "_held", "dates", "last_date", "weekdays", "yearly")

    def __init__(
        self, dates: frozenset[date], yearly: frozenset[tuple[int, int]], weekdays: frozenset[int]
    ) -> None:
        self.dates = dates
        self.yearly = yearly
        self.weekdays = weekdays
        self.last_date = max(dates, default=date.min)
        self._held: dict[date, bool] = {}
        self._free: dict[tuple[date, int], date | None] = {}

    def __eq__(self, other: object) -> bool:  # calendars compare by their dates alone
        if not isinstance(other, _DateIndex):
            return NotImplemented
        return (self.dates, self.yearly, self.weekdays) == (
            other.dates,
            other.yearly,
            other.weekdays,
        )

    def __hash__(self) -> int:
        return hash((self.dates, self.yearly, self.weekdays))

    def holds(self, day: date) -> bool:
        held = self._held.get(day)
        if held is None:
            held = (
                day in self.dates
                or (day.month, day.day) in self.yearly
                or day.weekday() in self.weekdays
            )
            if len(self._held) < _INDEX_LIMIT:
                self._held[day] = held
        return held

    def free_date(self, day: date, step: int) -> date | None:
        key = (day, step)
        if key in self._free:
            return self._free[key]
        found = None
        for distance in range(1, ROLL_LIMIT_DAYS + 1):
            try:
                candidate = day + timedelta(days=step * distance)
            except OverflowError:
                break
            if not self.holds(candidate):
                found = candidate
                break
        if len(self._free) < _INDEX_LIMIT:
            self._free[key] = found
        return found


class CalendarRef(BaseModel):
    """A trigger's calendar: which one, and what an occurrence on one of its dates does."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    policy: CalendarPolicy = "exclude"


class ExcludingCalendarRef(CalendarRef):
    """An interval trigger's calendar: its fire times are instants, not wall times, so
    they can be left out but not moved to another day."""

    @field_validator("policy")
    @classmethod
    def _exclude_only(cls, value: str) -> str:
        if value != "exclude":
            raise PydanticCustomError(
                "calendar_policy",
                "an interval trigger takes only the policy 'exclude' (its fire times are"
                " elapsed-time instants, which do not move to another day)",
            )
        return value


def calendar_for(ref: CalendarRef, calendars: Mapping[str, Calendar] | None) -> Calendar:
    """The calendar `ref` names, from those given. Raises CalendarMissing."""
    found = None if calendars is None else calendars.get(ref.name)
    if found is None:
        raise CalendarMissing(ref.name)
    return found


class StoredCalendar(Calendar):
    """A calendar as the store keeps it (`/calendars`): the value, with its identity and
    the version every change bumps (the `ETag`, and what the claim path caches by)."""

    id: UUID
    version: int = 1
    created_at: datetime
    updated_at: datetime

    def value(self) -> Calendar:
        """The calendar alone, as a trigger is handed it."""
        return Calendar.model_validate(
            self.model_dump(include=set(CALENDAR_FIELDS)), context=READ_BACK
        )


# The fields a client writes (POST, PUT, PATCH); the rest are the store's.
CALENDAR_FIELDS = tuple(Calendar.model_fields)


def empty_calendar(name: str) -> Calendar:
    """A calendar holding no date: what a trigger naming a calendar that is gone reads
    (explain after a deletion), so that it fires as if it named none."""
    return Calendar(name=name)
