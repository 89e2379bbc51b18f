"""Our triggers as APScheduler triggers, and the bridge between our Clock and wall time.

`DomainTrigger` does no time arithmetic of its own: each `next()` is our trigger's
`next_fire_time`, plus the task's deterministic jitter, so APScheduler fires on exactly
the instants the task row says (DST gaps and folds included) by construction.

APScheduler reads the wall clock (`datetime.now`) wherever it decides what is due; it
has no clock to inject. The engine's `Clock` is usually that same wall clock, and then
the shift is zero and nothing is translated. Under another clock (a test's fake clock)
`ClockBridge.shift()` is how far wall time is ahead of it, and a trigger armed with a
shift fires at the wall instants that correspond to the clock's instants at arming time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any
from uuid import UUID

from apscheduler import DeserializationError
from apscheduler.abc import Trigger as APSchedulerTrigger

from application.ports import Clock
from domain.calendars import Calendar
from domain.claims import jitter_offset
from domain.read_back import READ_BACK
from domain.triggers import TRIGGER_ADAPTER, Trigger

STATE_VERSION = 1
MILLISECOND = timedelta(milliseconds=1)
# Clocks closer than this are one clock read twice (the system clock): no shift at all,
# so a jittery read never moves APScheduler's fire times off our instants.
SAME_CLOCK = timedelta(seconds=1)


def wall_now() -> datetime:
    """What APScheduler calls now."""
    return datetime.now(timezone.utc)


class ClockBridge:
    """Translates the engine's clock to the wall clock that APScheduler reads."""

    def __init__(self, clock: Clock, wall: Callable[[], datetime] = wall_now) -> None:
        self._clock = clock
        self._wall = wall

    def shift(self) -> timedelta:
        """Wall time minus clock time, in whole milliseconds; zero for the same clock."""
        offset = self._wall() - self._clock.now()
        if abs(offset) < SAME_CLOCK:
            return timedelta(0)
        return round(offset / MILLISECOND) * MILLISECOND


class DomainTrigger(APSchedulerTrigger):
    """One task's trigger, stepped by APScheduler from the task's next occurrence.

    Args:
        task_id: the task; it keys the jitter, as in the claim rule.
        trigger: the task's trigger, the only source of fire times.
        jitter_seconds: the task's jitter.
        first: the task's `next_fire_at` (un-jittered); the first `next()` returns it,
            jittered. None for a trigger that never fires again.
        shift: added to every instant returned (see `ClockBridge`).
        calendars: the calendar the trigger names, if it names one, as it was when the
            schedule was armed (a change of it bumps the task's version, which re-arms).
    """

    __slots__ = ("_calendars", "_first", "_jitter", "_last", "_shift", "_task_id", "_trigger")

    def __init__(
        self,
        task_id: UUID,
        trigger: Trigger,
        jitter_seconds: int,
        first: datetime | None,
        shift: timedelta = timedelta(0),
        calendars: Mapping[str, Calendar] | None = None,
    ) -> None:
        self._calendars = dict(calendars or {})
        self._task_id = task_id
        self._trigger: Trigger = trigger
        self._jitter = jitter_seconds
        self._first = first
        self._last: datetime | None = None
        self._shift = shift

    @property
    def shift(self) -> timedelta:
        return self._shift

    @property
    def last_occurrence(self) -> datetime | None:
        """The un-jittered occurrence `next()` returned last."""
        return self._last

    def next(self) -> datetime | None:
        occurrence = (
            self._first
            if self._last is None
            else self._trigger.next_fire_time(self._last, self._calendars)
        )
        if occurrence is None:
            return None
        self._last = occurrence
        return occurrence + jitter_offset(self._task_id, occurrence, self._jitter) + self._shift

    def __getstate__(self) -> dict[str, Any]:
        """JSON values only: APScheduler's JSON serializer stores it as it is."""
        return {
            "version": STATE_VERSION,
            "task_id": str(self._task_id),
            "trigger": TRIGGER_ADAPTER.dump_python(self._trigger, mode="json"),
            "jitter_seconds": self._jitter,
            "first": _iso(self._first),
            "last": _iso(self._last),
            "shift_ms": self._shift // MILLISECOND,
            "calendars": [c.model_dump(mode="json") for c in self._calendars.values()],
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        if state.get("version") != STATE_VERSION:
            raise DeserializationError(
                f"DomainTrigger state version {state.get('version')!r} is not {STATE_VERSION}"
            )
        self._task_id = UUID(state["task_id"])
        self._trigger = TRIGGER_ADAPTER.validate_python(state["trigger"], context=READ_BACK)
        self._jitter = int(state["jitter_seconds"])
        self._first = _parse(state["first"])
        self._last = _parse(state["last"])
        self._shift = int(state["shift_ms"]) * MILLISECOND
        held = (Calendar.model_validate(c, context=READ_BACK) for c in state.get("calendars", []))
        self._calendars = {calendar.name: calendar for calendar in held}

    def __repr__(self) -> str:
        return (
            f"DomainTrigger(task_id={self._task_id}, kind={self._trigger.kind!r}, "
            f"last={_iso(self._last)}, shift={self._shift})"
        )


def _iso(instant: datetime | None) -> str | None:
    return None if instant is None else instant.isoformat()


def _parse(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)
