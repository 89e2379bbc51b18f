"""Triggers: when a task fires.

docs/triggers.md is the contract and records the choices it leaves open. A trigger is
plain data: `next_fire_time(after, calendars)` is a pure function of the trigger, `after`
and the calendars it is handed (only a trigger naming a calendar needs one), and returns
an aware UTC datetime with whole seconds, or None. Fire times and their annotations come
from one core, `domain.occurrences`, fed by each kind's `unbounded_next`
(`domain.schedule`). The calendar interval lives in `domain.calendar_trigger`.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from functools import lru_cache
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter, field_validator
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from domain import _cron, _cron_search
from domain._duration import seconds_of

# The flags a reading carries, named here for readers outside the domain.
from domain._wallclock import FOLD_FIRST as FOLD_FIRST
from domain._wallclock import FOLD_SECOND as FOLD_SECOND
from domain._wallclock import GAP_SHIFTED as GAP_SHIFTED
from domain._wallclock import GAP_TRANSITION as GAP_TRANSITION
from domain._wallclock import UTC, Reading, instant, read_wall, zone
from domain.calendar_trigger import CalendarTrigger as CalendarTrigger
from domain.calendars import CalendarRef, ExcludingCalendarRef
from domain.occurrences import Occurrence, Omission, window
from domain.schedule import BoundedSchedule, Schedule
from domain.schedule import Calendars as Calendars
from domain.trigger_fields import DEFAULT_DST, DstPolicy, TriggerInstant, ZoneName, unset

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

CRON_EXPRESSION_LIMIT = 1000


class CronTrigger(BoundedSchedule):
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


class IntervalTrigger(BoundedSchedule):
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
            raise PydanticCustomError("interval_every", str(exc)) from exc

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


class OneShotTrigger(Schedule):
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
