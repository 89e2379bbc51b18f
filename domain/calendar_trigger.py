"""The calendar interval trigger: a wall time on the dates start_date + k * (years,
months, weeks, days), each computed from the anchor date, never chained
(docs/triggers.md, "Calendar interval")."""

from __future__ import annotations

import calendar
from datetime import date, datetime, time, timedelta
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from domain._wallclock import local_reading, read_wall, wall_instant, zone
from domain.calendars import CalendarRef
from domain.occurrences import MONTH_CLAMPED, Occurrence, Omission
from domain.read_back import read_back
from domain.schedule import BoundedSchedule
from domain.trigger_fields import DEFAULT_DST, DstPolicy, TriggerInstant, ZoneName, unset

_EPOCH_DATE = date(1970, 1, 1)


# A calendar interval's steps, each at most 100 years' worth as an interval's `every` is:
# a larger one never comes back, and the task would stand enabled with no next run.
_MOST_STEPS = {"years": 100, "months": 1_200, "weeks": 5_218, "days": 36_525}


class CalendarTrigger(BoundedSchedule):
    """Fires at a wall time on the dates start_date + k * (years, months, weeks, days)."""

    kind: Literal["calendar"] = "calendar"
    years: int = Field(default=0, ge=0, json_schema_extra={"maximum": _MOST_STEPS["years"]})
    months: int = Field(default=0, ge=0, json_schema_extra={"maximum": _MOST_STEPS["months"]})
    weeks: int = Field(default=0, ge=0, json_schema_extra={"maximum": _MOST_STEPS["weeks"]})
    days: int = Field(
        default=0, ge=0, validate_default=True, json_schema_extra={"maximum": _MOST_STEPS["days"]}
    )
    hour: int = Field(default=0, ge=0, le=23)
    minute: int = Field(default=0, ge=0, le=59)
    second: int = Field(default=0, ge=0, le=59)
    start_date: date | None = None
    timezone: ZoneName = "UTC"
    start_at: TriggerInstant | None = None
    end_at: TriggerInstant | None = None
    dst: DstPolicy | None = Field(default=None, exclude_if=unset)
    calendar: CalendarRef | None = Field(default=None, exclude_if=unset)

    @field_validator("years", "months", "weeks", "days")
    @classmethod
    def _at_most_a_century(cls, value: int, info: ValidationInfo) -> int:
        # Checked on what is written; a trigger read back from a store passed the rule
        # or predates it, and must still be read (READ_BACK).
        most = _MOST_STEPS[info.field_name or ""]
        if value > most and not read_back(info):
            raise PydanticCustomError(
                "less_than_equal", "Input should be less than or equal to {le}", {"le": most}
            )
        return value

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

    def unbounded_next(self, floor: datetime, omitted: list[Omission] | None) -> Occurrence | None:
        try:
            return self._first_fire_after(floor, omitted)
        except OverflowError:
            return None

    def names(self, wall: datetime) -> bool:
        if wall.time() != time(self.hour, self.minute, self.second):
            return False
        first = self.first_date()
        elapsed = (wall.date() - first).days
        if elapsed < 0:
            return False
        # The estimate is off by at most one step (a month's length around its mean).
        guess = int(elapsed / self._mean_step_days())
        try:
            return any(self._wall(k, first)[0] == wall for k in range(max(0, guess - 2), guess + 3))
        except OverflowError:
            return False

    def _mean_step_days(self) -> float:
        """The days one step spans on average (a month's mean length for months)."""
        return (12 * self.years + self.months) * 30.436875 + 7 * self.weeks + self.days

    def _wall(self, k: int, first: date) -> tuple[datetime, bool]:
        """The k-th fire's wall time, computed from the anchor date `first`, never
        chained, and whether a month step clamped it to a month's last day."""
        day = _add_months(first, k * (12 * self.years + self.months))
        clamped = day.day != first.day
        day += timedelta(days=k * (7 * self.weeks + self.days))
        return datetime.combine(day, time(self.hour, self.minute, self.second)), clamped

    def _first_fire_after(self, floor: datetime, omitted: list[Omission] | None) -> Occurrence:
        # Fire instants never decrease with k (dates are a day or more apart and no
        # zone shifts by more than a day), so estimate k, step back, then forward.
        tz = zone(self.timezone)
        first = self.first_date()
        policy = self.dst or DEFAULT_DST
        local = local_reading(floor, tz)  # None before year 1 here: from the first fire
        elapsed = -1 if local is None else (local.date() - first).days
        k = max(0, int(elapsed / self._mean_step_days()) - 1)
        while k > 0 and wall_instant(self._wall(k, first)[0], tz) > floor:
            k -= 1
        while True:
            wall, clamped = self._wall(k, first)
            readings = read_wall(wall, tz, policy.gap, policy.fold)
            if not readings:
                self._tell_gap(omitted, floor, wall)
            for moment, flags in readings:
                if moment > floor:
                    return Occurrence(moment, wall, (*flags, MONTH_CLAMPED) if clamped else flags)
            k += 1


def _add_months(day: date, months: int) -> date:
    """`day` moved by whole months, clamped to the last day of a shorter month."""
    year, month = divmod(day.month - 1 + months, 12)
    year += day.year
    if not 1 <= year <= 9999:
        raise OverflowError(f"year {year} is out of range")
    month += 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))
