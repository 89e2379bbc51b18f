"""The values the occurrence core hands out and takes in: a fire time (`Occurrence`),
a wall time that does not fire (`Omission`), both together (`AnnotatedFireTimes`), and
what a trigger kind provides (`Schedule`). See domain/occurrences.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Literal, Protocol

from domain._wallclock import Reading
from domain.calendars import CalendarRef

ROLLED = "rolled"
MONTH_CLAMPED = "month_clamped"
OmissionReason = Literal["dst_gap", "excluded", "rolled_away", "merged"]


@dataclass(frozen=True, slots=True)
class Occurrence:
    """A fire time: the instant, the naive wall time it was named by, how it got there."""

    at: datetime
    wall: datetime
    flags: tuple[str, ...] = ()
    rolled_from: date | None = None


@dataclass(frozen=True, slots=True)
class Omission:
    """A wall-time occurrence that does not fire. `key` places it in time: the instant it
    would have had (under the `shift` gap rule, before any roll)."""

    key: datetime
    date: date
    wall: time
    reason: OmissionReason
    calendar: str | None = None


@dataclass(slots=True)
class AnnotatedFireTimes:
    """The fire times and, in time order, the omissions up to the last of them;
    `omitted_truncated` when there were more omissions than `omitted` tells (it tells
    the first MAX_OMISSIONS_TOLD, domain/occurrences.py)."""

    occurrences: list[Occurrence] = field(default_factory=list)
    omitted: list[Omission] = field(default_factory=list)
    omitted_truncated: bool = False


class Schedule(Protocol):
    """What a trigger kind provides to this module."""

    @property
    def timezone(self) -> str: ...

    def bounds(self) -> tuple[datetime | None, datetime | None]: ...

    def calendar_ref(self) -> CalendarRef | None: ...

    def unbounded_next(self, floor: datetime, omitted: list[Omission] | None) -> Occurrence | None:
        """The first unrolled fire strictly after the UTC whole-second `floor`,
        ignoring `start_at` / `end_at` (an anchor is not a bound)."""
        ...

    def names(self, wall: datetime) -> bool:
        """Whether the unrolled schedule has the naive wall time `wall`."""
        ...

    def read_on(self, day: date, wall: time) -> tuple[Reading, ...]:
        """The instants (and flags) of wall time `wall` on `day`, under the DST policy."""
        ...
