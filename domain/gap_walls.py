"""A held date's wall times that a DST gap skipped, for the calendar's roll.

Under `next_business_day` / `previous_business_day` a fire on a held date moves to the
same wall time on the nearest free date, and the DST rules then apply on that date
(docs/triggers.md, "Calendars"). With `dst.gap: "skip"`, a wall time inside the gap on
its own date never fires there, so the unrolled schedule has no occurrence for it; when
its date is held it must still roll (Sunday 02:30 on the night the clocks spring
forward, a holiday, fires on Saturday at 02:30 under `previous_business_day`).

`HeldGapWalls` is the unrolled schedule with those wall times put back, each as a
stand-in occurrence the roll moves like any other. A stand-in never fires where it
stands (its date is held), so its instant only orders it: half a second before the
instant its wall time would have under the `shift` rule. Every real fire is at a whole
second, so no stand-in shares an instant with one (an hourly 03:30 on that date is
the same instant as 02:30 shifted), and each is stepped past exactly once.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from domain._wallclock import Reading
from domain.calendars import Calendar, CalendarRef
from domain.fire_values import Occurrence, Omission, Schedule

_HALF_SECOND = timedelta(milliseconds=500)
GAP_WALL = "gap_wall"  # the flag of a stand-in; never carried to the fire it rolls to


class HeldGapWalls:
    """`schedule` with the gap-skipped wall times of the dates `calendar` holds."""

    def __init__(self, schedule: Schedule, calendar: Calendar) -> None:
        self._schedule = schedule
        self._calendar = calendar

    @property
    def timezone(self) -> str:
        return self._schedule.timezone

    def bounds(self) -> tuple[datetime | None, datetime | None]:
        return self._schedule.bounds()

    def calendar_ref(self) -> CalendarRef | None:
        return self._schedule.calendar_ref()

    def names(self, wall: datetime) -> bool:
        return self._schedule.names(wall)

    def read_on(self, day: date, wall: time) -> tuple[Reading, ...]:
        return self._schedule.read_on(day, wall)

    def unbounded_next(self, floor: datetime, omitted: list[Omission] | None) -> Occurrence | None:
        # After a stand-in the floor is half a second off a whole one: strictly after it
        # is strictly after the whole second below it.
        gaps: list[Omission] = []
        found = self._schedule.unbounded_next(floor.replace(microsecond=0), gaps)
        for gap in gaps:  # in time order, each before `found`
            if gap.date in self._calendar:
                at = gap.key - _HALF_SECOND
                if at > floor:
                    return Occurrence(at, datetime.combine(gap.date, gap.wall), (GAP_WALL,))
            elif omitted is not None:
                omitted.append(gap)  # skipped on a free date: the gap rule stands
        return found


def told_key(occurrence: Occurrence) -> datetime:
    """The instant an omission of `occurrence` is placed at: a stand-in's is the whole
    second its wall time would have had (as a gap-skipped wall time's is)."""
    return occurrence.at + _HALF_SECOND if GAP_WALL in occurrence.flags else occurrence.at
