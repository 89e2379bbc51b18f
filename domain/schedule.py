"""What every kind of trigger shares (domain/triggers.py has the kinds): fire times
and their annotations through the one core, `domain.occurrences`, fed by each kind's
`unbounded_next`; and the bounds, calendar and DST policy of the kinds that take them.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from datetime import date, datetime, time
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from domain._wallclock import Reading, instant, read_wall, wall_instant, zone
from domain.calendars import Calendar, CalendarRef
from domain.occurrences import AnnotatedFireTimes, Occurrence, Omission, annotate, next_occurrence
from domain.trigger_fields import DEFAULT_DST, DstPolicy

Calendars = Mapping[str, Calendar] | None


class Schedule(BaseModel):
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


class BoundedSchedule(Schedule):
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
