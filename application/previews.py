"""Previewing a bare trigger: validated, completed as a task created then would be, and
its next fire times listed with their flags (`POST /preview`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from application.bounds import check_count, in_range
from application.ports import Clock
from domain.calendars import Calendar
from domain.claims import BEGINNING_OF_TIME, SECOND, complete_trigger
from domain.errors import InvalidRequest
from domain.instants import truncate
from domain.occurrences import AnnotatedFireTimes
from domain.triggers import TRIGGER_ADAPTER, OneShotTrigger, Trigger
from domain.validation import field_errors


def preview_trigger(
    trigger: dict[str, Any] | Trigger,
    count: int,
    after: datetime | None,
    calendars: Sequence[Calendar],
    clock: Clock,
) -> tuple[Trigger, AnnotatedFireTimes]:
    """The next `count` fire times of a bare trigger, each with its flags, and what did
    not fire: strictly after `after` when given, else from now on (`clock`) as a task
    created now would fire (a one-shot: its fire time, even past). `calendars` are
    calendars given inline, for trying a policy before any calendar is stored."""
    check_count(count)
    if isinstance(trigger, dict):
        try:
            trigger = TRIGGER_ADAPTER.validate_python(trigger)
        except ValidationError as exc:
            raise InvalidRequest.of(field_errors(exc, prefix="trigger")) from None
    named: dict[str, Calendar] = {}
    for index, calendar in enumerate(calendars):
        if calendar.name in named:
            raise InvalidRequest(f"calendars.{index}.name", "names a calendar twice")
        named[calendar.name] = calendar
    ref = getattr(trigger, "calendar", None)
    if ref is not None and ref.name not in named:
        raise InvalidRequest(
            "trigger.calendar.name",
            f"no calendar named {ref.name!r}; give it in calendars to preview it",
        )
    start = in_range("after", after) if after is not None else truncate(clock.now())
    trigger = complete_trigger(trigger, start)
    floor = start if after is not None else start - SECOND
    if after is None and isinstance(trigger, OneShotTrigger):
        # Its one fire time, even past: a task's grace rule is not the trigger's.
        run_at = trigger.next_fire_time(BEGINNING_OF_TIME)
        if run_at is not None:
            floor = min(floor, run_at - SECOND)
    return trigger, trigger.annotated(floor, count, named)
