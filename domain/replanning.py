"""Re-planning the tasks that name a calendar when it changes (docs/api.md, "Calendars").

Both stores apply `replanned` to every task naming the calendar, in the transaction that
writes the change, so the rule is written once.
"""

from __future__ import annotations

from datetime import datetime

from domain.calendars import Calendar
from domain.claims import first_fire_at_or_after, run_instant
from domain.history import TaskVersion, calendar_replanned
from domain.tasks import Task


def replanned(
    task: Task, calendar: Calendar, versions: tuple[int, int], now: datetime, actor: str | None
) -> tuple[Task, TaskVersion]:
    """`task` under the changed `calendar` (its versions before and after), at the next
    task version, and the history version that records it.

    An occurrence already due (`next_fire_at` at or before now, not claimed yet) stays
    due when the new calendar still lets it fire; otherwise the next occurrence is the
    first strictly after now, which a date the calendar no longer holds may bring closer
    than before. Never one at or before now that is not due: it may have fired already
    (an occurrence at this very second). A paused task stays unplanned (it is planned
    when resumed).
    """
    update: dict[str, object] = {"version": task.version + 1, "updated_at": now}
    if task.enabled:
        calendars = {calendar.name: calendar}
        due = task.next_fire_at
        if due is not None and due <= now:
            following = first_fire_at_or_after(task.trigger, due, calendars)
        else:
            following = task.trigger.next_fire_time(now, calendars)
        update |= {"next_fire_at": following, "next_run_at": run_instant(task, following)}
    new = task.model_copy(update=update)
    return new, calendar_replanned(task, new, versions, actor)


def calendar_name(task: Task) -> str | None:
    """The name of the calendar the task's trigger names, if any."""
    ref = task.trigger.calendar_ref()
    return None if ref is None else ref.name
