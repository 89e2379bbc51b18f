"""Triggers: when a task fires.

docs/triggers.md is the contract and records the choices it leaves open. A trigger is
plain data: `next_fire_time(after, calendars)` is a pure function of the trigger, `after`
and the calendars it is handed (only a trigger naming a calendar needs one), and returns
an aware UTC datetime with whole seconds, or None. Fire times and their annotations come
from one core, `domain.occurrences`, fed by each kind's `unbounded_next`.
"""

from __future__ import annotations

import calendar
from abc import abstractmethod
from collections.abc import Mapping
from datetime import date, datetime, time, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationInfo,
    field_validator,
)
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from domain import _cron, _cron_search
from domain._duration import seconds_of

# The flags a reading carries, named here for readers outside the domain.
from domain._wallclock import FOLD_FIRST as FOLD_FIRST
from domain._wallclock import FOLD_SECOND as FOLD_SECOND
from domain._wallclock import GAP_SHIFTED as GAP_SHIFTED
from domain._wallclock import GAP_TRANSITION as GAP_TRANSITION
from domain._wallclock import (
    UTC,
    Reading,
    instant,
    read_wall,
    wall_instant,
    zone,
)
from domain.calendars import Calendar, CalendarRef, ExcludingCalendarRef
from domain.occurrences import (
    MONTH_CLAMPED,
    AnnotatedFireTimes,
    Occurrence,
    Omission,
    annotate,
    next_occurrence,
    window,
)
from domain.read_back import read_back
from domain.trigger_fields import DEFAULT_DST, DstPolicy, TriggerInstant, ZoneName, unset

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DATE = date(1970, 1, 1)
Calendars = Mapping[str, Calendar] | None


class _Schedule(BaseModel):
    """What every kind shares: `next_fire_time` and `annotated` through the one core.

    The optional fields added after the first release (`dst`, `calendar`) are left out
    of a trigger's JSON while unset, so older triggers round-trip byte for byte.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    if TYPE_CHECKING:
        timezone: str

    def bounds(self) -> tuple[datetime | None, datetime | None]:
        return None, None

    def calendar_ref(self) -> CalendarRef | None:
        return None

    def policy(self) -> DstPolicy:
        return DEFAULT_DST

    @abstractmethod
    def unbounded_next(self, floor: datetime, omitted: list[Omission] | None) -> Occurrence | None:
        """The first occurrence strictly after `floor`, bounds and calendar aside; wall
        times that do not fire are told to `omitted` when it is a list."""

    def names(self, wall: datetime) -> bool:
        """Whether the unrolled schedule has the naive wall time `wall`. Asked only of a
        wall time other than the one an occurrence shows (calendar_fires): the kinds
        whose occurrences show the one wall time they have (an interval, a one-shot)
        name no other."""
        return False

    def read_on(self, day: date, wall: time) -> tuple[Reading, ...]:
        """The instants (and flags) of wall time `wall` on `day`, by the DST policy."""
        policy = self.policy()
        return read_wall(datetime.combine(day, wall), zone(self.timezone), policy.gap, policy.fold)

    def next_fire_time(self, after: datetime, calendars: Calendars = None) -> datetime | None:
        """The first fire time strictly after `after` (aware), or None. `calendars`
        holds the calendar the trigger names (CalendarMissing when it does not)."""
        found = next_occurrence(self, after, calendars)
        return None if found is None else found.at

    def annotated(
        self, after: datetime, count: int, calendars: Calendars = None
    ) -> AnnotatedFireTimes:
        """Up to `count` fire times after `after`, with their flags, and the wall-time
        occurrences between that did not fire (and why)."""
        return annotate(self, after, count, calendars)

    def _tell_gap(self, omitted: list[Omission] | None, floor: datetime, wall: datetime) -> None:
        if omitted is not None:
            moment = wall_instant(wall, zone(self.timezone))
            if moment > floor:
                omitted.append(Omission(moment, wall.date(), wall.time(), "dst_gap"))


class _Bounded(_Schedule):
    """Validation shared by the kinds that take `start_at` / `end_at` bounds."""

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

    def bounds(self) -> tuple[datetime | None, datetime | None]:
        return getattr(self, "start_at", None), getattr(self, "end_at", None)

    def calendar_ref(self) -> CalendarRef | None:
        return getattr(self, "calendar", None)

    def policy(self) -> DstPolicy:
        return getattr(self, "dst", None) or DEFAULT_DST


CRON_EXPRESSION_LIMIT = 1000


class CronTrigger(_Bounded):
    """Fires at the wall-clock times a cron expression names, in `timezone`."""

    kind: Literal["cron"] = "cron"
    # Far longer than any real schedule: a longer one is a mistake (or an attack on parse time).
    # An empty one is refused by the parser, which says what it expects; the schema
    # declares it non-empty all the same.
    expression: str = Field(max_length=CRON_EXPRESSION_LIMIT, json_schema_extra={"minLength": 1})
    timezone: ZoneName = "UTC"
    start_at: TriggerInstant | None = None
    end_at: TriggerInstant | None = None
    dst: DstPolicy | None = Field(default=None, exclude_if=unset)
    calendar: CalendarRef | None = Field(default=None, exclude_if=unset)

    @field_validator("expression")
    @classmethod
    def _parse_expression(cls, value: str) -> str:
        try:
            _cron.parse(value)
        except _cron.CronError as exc:
            raise PydanticCustomError("cron_expression", str(exc)) from exc
        return value

    def unbounded_next(self, floor: datetime, omitted: list[Omission] | None) -> Occurrence | None:
        policy = self.dst or DEFAULT_DST
        skipped = None
        if omitted is not None:

            def skipped(moment: datetime, wall: datetime) -> None:
                omitted.append(Omission(moment, wall.date(), wall.time(), "dst_gap"))

        schedule = _cron.parse(self.expression)
        try:
            found = _cron_search.next_fire(
                schedule, zone(self.timezone), floor, policy.gap, policy.fold, skipped
            )
        except OverflowError:  # the search ran past year 9999
            return None
        return None if found is None else Occurrence(*found)

    def names(self, wall: datetime) -> bool:
        return _cron.parse(self.expression).later_same_day(wall) == wall

    def read_on(self, day: date, wall: time) -> tuple[Reading, ...]:
        policy = self.dst or DEFAULT_DST
        all_hours = _cron.parse(self.expression).all_hours
        moment = datetime.combine(day, wall)
        return read_wall(moment, zone(self.timezone), policy.gap, policy.fold, all_hours)


def _no_dst(value: object) -> None:
    if value is not None:
        raise PydanticCustomError(
            "interval_dst",
            "an interval trigger counts elapsed time and takes no dst policy"
            " (use a cron or calendar trigger for wall-clock times)",
        )


class IntervalTrigger(_Bounded):
    """Fires every `every` seconds of elapsed time from an anchor: anchor + k * every."""

    kind: Literal["interval"] = "interval"
    every: int
    timezone: ZoneName = "UTC"
    start_at: TriggerInstant | None = None
    end_at: TriggerInstant | None = None
    anchor: TriggerInstant | None = None
    calendar: ExcludingCalendarRef | None = Field(default=None, exclude_if=unset)
    dst: SkipJsonSchema[None] = Field(default=None, exclude=True)

    @field_validator("every", mode="before", json_schema_input_type=int | str)
    @classmethod
    def _whole_seconds(cls, value: object) -> int:
        try:
            return seconds_of(value)
        except ValueError as exc:
            raise PydanticCustomError("interval_every", f"every {exc}") from exc

    @field_validator("dst", mode="before")
    @classmethod
    def _rejects_dst(cls, value: object) -> None:
        _no_dst(value)

    def effective_anchor(self) -> datetime:
        """`start_at`, else `anchor` (the task's creation), else the Unix epoch."""
        chosen = self.start_at or self.anchor
        return EPOCH if chosen is None else _anchor_instant(chosen, self.timezone)

    def next_fire_time(self, after: datetime, calendars: Calendars = None) -> datetime | None:
        """The first `anchor + k * every` (k >= 0) strictly after `after`, or None."""
        if self.calendar is not None:
            return super().next_fire_time(after, calendars)
        floor, end = window(self, after)
        fire = self._first_after(floor)
        return None if fire is None or (end is not None and fire > end) else fire

    def unbounded_next(self, floor: datetime, omitted: list[Omission] | None) -> Occurrence | None:
        fire = self._first_after(floor)
        if fire is None:
            return None
        return Occurrence(fire, fire.astimezone(zone(self.timezone)).replace(tzinfo=None))

    def _first_after(self, floor: datetime) -> datetime | None:
        anchor = self.effective_anchor()
        if floor < anchor:
            return anchor
        step = timedelta(seconds=self.every)
        try:
            return anchor + ((floor - anchor) // step + 1) * step
        except OverflowError:
            return None


@lru_cache(maxsize=4096)
def _anchor_instant(chosen: datetime, timezone: str) -> datetime:
    # An interval's anchor is read at every claim of its task; reading it is pure, so
    # it is remembered by value (not on the frozen model, which `model_copy` would
    # carry over to a copy with another anchor).
    return instant(chosen, zone(timezone))


# A calendar interval's steps, each at most 100 years' worth as an interval's `every` is:
# a larger one never comes back, and the task would stand enabled with no next run.
_MOST_STEPS = {"years": 100, "months": 1_200, "weeks": 5_218, "days": 36_525}


class CalendarTrigger(_Bounded):
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
        elapsed = (floor.astimezone(tz).date() - first).days
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


class OneShotTrigger(_Schedule):
    """Fires once, at `run_at` (a naive `run_at` is a wall time in `timezone`, read by
    the DST policy; `fold: both` makes a repeated wall time fire at both instants)."""

    kind: Literal["one_shot"] = "one_shot"
    run_at: TriggerInstant
    timezone: ZoneName = "UTC"
    dst: DstPolicy | None = Field(default=None, exclude_if=unset)

    def policy(self) -> DstPolicy:
        return self.dst or DEFAULT_DST

    def fire_instant(self) -> datetime:
        """The instant `run_at` names (a naive one read with fold=0, as the bounds are)."""
        return instant(self.run_at, zone(self.timezone))

    def unbounded_next(self, floor: datetime, omitted: list[Omission] | None) -> Occurrence | None:
        tz = zone(self.timezone)
        if self.run_at.tzinfo is not None and self.run_at.utcoffset() is not None:
            moment = instant(self.run_at, tz)
            wall = moment.astimezone(tz).replace(tzinfo=None)
            return Occurrence(moment, wall) if moment > floor else None
        wall = self.run_at.replace(microsecond=0)
        readings = self.read_on(wall.date(), wall.time())
        if not readings:
            self._tell_gap(omitted, floor, wall)
        for moment, flags in readings:
            if moment > floor:
                return Occurrence(moment, wall, flags)
        return None


Trigger = Annotated[
    CronTrigger | IntervalTrigger | CalendarTrigger | OneShotTrigger,
    Field(discriminator="kind"),
]
TRIGGER_ADAPTER: TypeAdapter[Trigger] = TypeAdapter(Trigger)


def fire_times(
    trigger: CronTrigger | IntervalTrigger | CalendarTrigger | OneShotTrigger,
    after: datetime,
    count: int,
    calendars: Calendars = None,
) -> list[datetime]:
    """Up to `count` fire times after `after`, each from the one before; fewer at the end."""
    times: list[datetime] = []
    current: datetime | None = after
    while len(times) < count and current is not None:
        current = trigger.next_fire_time(current, calendars)
        if current is not None:
            times.append(current)
    return times


def _add_months(day: date, months: int) -> date:
    """`day` moved by whole months, clamped to the last day of a shorter month."""
    year, month = divmod(day.month - 1 + months, 12)
    year += day.year
    if not 1 <= year <= 9999:
        raise OverflowError(f"year {year} is out of range")
    month += 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))
