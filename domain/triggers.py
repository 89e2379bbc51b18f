"""Triggers: when a task fires.

The contract is docs/triggers.md ("The rules"), which also records the choices they
leave open. A trigger is plain data: `next_fire_time(after)` is a pure function of the trigger
and `after`, and returns an aware UTC datetime with whole seconds, or None.
"""

from __future__ import annotations

import calendar
from datetime import date, datetime, time, timedelta
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from domain import _cron
from domain._duration import seconds_of
from domain._wallclock import (
    ONE_SECOND,
    UTC,
    check_zone_name,
    instant,
    require_aware,
    wall_instant,
    zone,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DATE = date(1970, 1, 1)


def _zone_name(value: str) -> str:
    try:
        return check_zone_name(value)
    except ValueError as exc:
        raise PydanticCustomError("timezone", str(exc)) from exc


ZoneName = Annotated[str, AfterValidator(_zone_name)]


class _Bounded(BaseModel):
    """Validation shared by the kinds that take `start_at` / `end_at` bounds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("end_at", check_fields=False)
    @classmethod
    def _end_not_before_start(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        start, name = info.data.get("start_at"), info.data.get("timezone")
        if value is None or start is None or name is None:
            return value
        tz = zone(name)
        if instant(value, tz) < instant(start, tz):
            raise PydanticCustomError(
                "end_before_start",
                f"end_at {value.isoformat()} is before start_at {start.isoformat()}",
            )
        return value


class CronTrigger(_Bounded):
    """Fires at the wall-clock times a cron expression names, in `timezone`."""

    kind: Literal["cron"] = "cron"
    expression: str
    timezone: ZoneName = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None

    @field_validator("expression")
    @classmethod
    def _parse_expression(cls, value: str) -> str:
        try:
            _cron.parse(value)
        except _cron.CronError as exc:
            raise PydanticCustomError("cron_expression", str(exc)) from exc
        return value

    def next_fire_time(self, after: datetime) -> datetime | None:
        """The first fire time strictly after `after` (aware), or None. See docs/triggers.md."""
        floor, end = _window(after, self.start_at, self.end_at, self.timezone)
        if end is not None and floor >= end:
            return None
        try:
            fire = _cron.next_fire(_cron.parse(self.expression), zone(self.timezone), floor)
        except OverflowError:  # the search ran past year 9999
            return None
        return _until(fire, end)


class IntervalTrigger(_Bounded):
    """Fires every `every` seconds of elapsed time from an anchor: anchor + k * every."""

    kind: Literal["interval"] = "interval"
    every: int
    timezone: ZoneName = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None
    anchor: datetime | None = None

    @field_validator("every", mode="before", json_schema_input_type=int | str)
    @classmethod
    def _whole_seconds(cls, value: object) -> int:
        try:
            return seconds_of(value)
        except ValueError as exc:
            raise PydanticCustomError("interval_every", f"every {exc}") from exc

    def effective_anchor(self) -> datetime:
        """`start_at`, else `anchor` (the task's creation), else the Unix epoch."""
        chosen = self.start_at or self.anchor
        return EPOCH if chosen is None else instant(chosen, zone(self.timezone))

    def next_fire_time(self, after: datetime) -> datetime | None:
        """The first `anchor + k * every` (k >= 0) strictly after `after`, or None."""
        floor, end = _window(after, self.start_at, self.end_at, self.timezone)
        anchor = self.effective_anchor()
        if floor < anchor:
            return _until(anchor, end)
        step = timedelta(seconds=self.every)
        try:
            fire = anchor + ((floor - anchor) // step + 1) * step
        except OverflowError:
            return None
        return _until(fire, end)


class CalendarTrigger(_Bounded):
    """Fires at a wall time on the dates start_date + k * (years, months, weeks, days)."""

    kind: Literal["calendar"] = "calendar"
    years: int = Field(default=0, ge=0)
    months: int = Field(default=0, ge=0)
    weeks: int = Field(default=0, ge=0)
    days: int = Field(default=0, ge=0, validate_default=True)
    hour: int = Field(default=0, ge=0, le=23)
    minute: int = Field(default=0, ge=0, le=59)
    second: int = Field(default=0, ge=0, le=59)
    start_date: date | None = None
    timezone: ZoneName = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None

    @field_validator("days")
    @classmethod
    def _some_unit_positive(cls, value: int, info: ValidationInfo) -> int:
        others = [info.data.get(unit) for unit in ("years", "months", "weeks")]
        if value == 0 and all(other == 0 for other in others):
            raise PydanticCustomError(
                "calendar_interval",
                "a calendar interval needs at least one of years, months, weeks, days > 0",
            )
        return value

    def first_date(self) -> date:
        """`start_date`, else the local date of `start_at`, else 1970-01-01."""
        if self.start_date is not None:
            return self.start_date
        if self.start_at is None:
            return _EPOCH_DATE
        if self.start_at.tzinfo is None:
            return self.start_at.date()
        return self.start_at.astimezone(zone(self.timezone)).date()

    def next_fire_time(self, after: datetime) -> datetime | None:
        """The first fire time strictly after `after` (aware), or None. See docs/triggers.md."""
        floor, end = _window(after, self.start_at, self.end_at, self.timezone)
        if end is not None and floor >= end:
            return None
        try:
            fire = self._first_fire_after(floor)
        except OverflowError:
            return None
        return _until(fire, end)

    def _fire(self, k: int) -> datetime:
        """The k-th fire instant, computed from the anchor date, never chained."""
        day = _add_months(self.first_date(), k * (12 * self.years + self.months))
        day += timedelta(days=k * (7 * self.weeks + self.days))
        wall = datetime.combine(day, time(self.hour, self.minute, self.second))
        return wall_instant(wall, zone(self.timezone))

    def _first_fire_after(self, floor: datetime) -> datetime:
        # Fire instants never decrease with k (dates are a day or more apart and no
        # zone shifts by more than a day), so estimate k, step back, then forward.
        elapsed = (floor.astimezone(zone(self.timezone)).date() - self.first_date()).days
        period = (12 * self.years + self.months) * 30.436875 + 7 * self.weeks + self.days
        k = max(0, int(elapsed / period) - 1)
        while k > 0 and self._fire(k) > floor:
            k -= 1
        while (fire := self._fire(k)) <= floor:
            k += 1
        return fire


class OneShotTrigger(BaseModel):
    """Fires once, at `run_at` (a naive `run_at` is a wall time in `timezone`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["one_shot"] = "one_shot"
    run_at: datetime
    timezone: ZoneName = "UTC"

    def fire_instant(self) -> datetime:
        return instant(self.run_at, zone(self.timezone))

    def next_fire_time(self, after: datetime) -> datetime | None:
        """`run_at` when it is strictly after `after` (aware), else None."""
        run = self.fire_instant()
        return run if run > _after_instant(after) else None


Trigger = Annotated[
    CronTrigger | IntervalTrigger | CalendarTrigger | OneShotTrigger,
    Field(discriminator="kind"),
]
TRIGGER_ADAPTER: TypeAdapter[Trigger] = TypeAdapter(Trigger)


def fire_times(
    trigger: CronTrigger | IntervalTrigger | CalendarTrigger | OneShotTrigger,
    after: datetime,
    count: int,
) -> list[datetime]:
    """Up to `count` fire times after `after`, each from the one before; fewer at the end."""
    times: list[datetime] = []
    current: datetime | None = after
    while len(times) < count and current is not None:
        current = trigger.next_fire_time(current)
        if current is not None:
            times.append(current)
    return times


def _window(
    after: datetime, start_at: datetime | None, end_at: datetime | None, zone_name: str
) -> tuple[datetime, datetime | None]:
    """The instant fire times must be strictly later than, and the inclusive end."""
    tz = zone(zone_name)
    floor = _after_instant(after)
    if start_at is not None:
        floor = max(floor, instant(start_at, tz) - ONE_SECOND)
    return floor, None if end_at is None else instant(end_at, tz)


def _after_instant(after: datetime) -> datetime:
    require_aware(after)
    return after.astimezone(UTC).replace(microsecond=0)


def _until(fire: datetime | None, end: datetime | None) -> datetime | None:
    return None if fire is None or (end is not None and fire > end) else fire


def _add_months(day: date, months: int) -> date:
    """`day` moved by whole months, clamped to the last day of a shorter month."""
    year, month = divmod(day.month - 1 + months, 12)
    year += day.year
    if not 1 <= year <= 9999:
        raise OverflowError(f"year {year} is out of range")
    month += 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))
