"""A trigger sent again keeps its schedule: what the scheduler filled in when it stored
a trigger (the anchor of an interval without `start_at`, the `start_date` of a calendar
interval without one) is carried over when the rest of the trigger is equal, so that a
`PUT`, an apply or a `PATCH` re-sending the same trigger never re-anchors it (and so never
fires it again at once)."""

from __future__ import annotations

from domain.tasks import Task, TaskSpec
from domain.triggers import CalendarTrigger, IntervalTrigger, Trigger


def carried(spec: TaskSpec, current: Task) -> TaskSpec:
    """`spec` with the stored trigger when they differ only in what the scheduler filled
    in at store time."""
    trigger = carried_trigger(spec.trigger, current.trigger)
    return spec if trigger is spec.trigger else spec.model_copy(update={"trigger": trigger})


def carried_trigger(wanted: Trigger, stored: Trigger) -> Trigger:
    candidate: Trigger = wanted
    if isinstance(wanted, IntervalTrigger) and isinstance(stored, IntervalTrigger):
        unanchored = wanted.start_at is None and wanted.anchor is None
        if unanchored:
            candidate = wanted.model_copy(update={"anchor": stored.anchor})
    elif isinstance(wanted, CalendarTrigger) and isinstance(stored, CalendarTrigger):
        undated = wanted.start_date is None and wanted.start_at is None
        if undated:
            candidate = wanted.model_copy(update={"start_date": stored.start_date})
    return stored if candidate == stored else wanted
