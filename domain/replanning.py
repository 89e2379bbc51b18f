"""Re-planning the tasks that name a calendar when it changes (docs/api.md, "Calendars").

Both stores apply `replanned` to every task naming the calendar, in the transaction that
writes the change, so the rule is written once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from domain.calendars import Calendar
from domain.claims import first_fire_at_or_after, run_instant
from domain.history import TaskVersion, calendar_replanned
from domain.tasks import Task
from domain.triggers import Trigger


def replanned_all(
    tasks: Iterable[Task],
    calendar: Calendar,
    versions: tuple[int, int],
    now: datetime,
    actor: str | None,
) -> list[tuple[Task, TaskVersion]]:
    """`replanned` of each of `tasks`. Tasks whose trigger and schedule are equal (a
    fleet of tasks sharing one trigger, each with its own target) share one search."""
    found: dict[tuple[Trigger, bool, datetime], datetime | None] = {}

    def following(task: Task) -> datetime | None:
        due = task.next_fire_at
        keeps_due = due is not None and due <= now
        key = (task.trigger, keeps_due, due if due is not None and keeps_due else _floor(task, now))
        if key not in found:
            found[key] = _following(task.trigger, due, calendar, _floor(task, now), now)
        return found[key]

    return [replanned(task, calendar, versions, now, actor, following) for task in tasks]


def replanned(
    task: Task,
    calendar: Calendar,
    versions: tuple[int, int],
    now: datetime,
    actor: str | None,
    search: Callable[[Task], datetime | None] | None = None,
) -> tuple[Task, TaskVersion]:
    """`task` under the changed `calendar` (its versions before and after), at the next
    task version, and the history version that records it.

    An occurrence already due (`next_fire_at` at or before now, not claimed yet) stays
    due when the new calendar still lets it fire; otherwise the next occurrence is the
    first strictly after now, which a date the calendar no longer holds may bring closer
    than before. Never one at or before now that is not due, nor one at or before the
    task's last run: it may have fired already (in this very second, or claimed by a
    replica whose clock is ahead). A paused task stays unplanned (it is planned when
    resumed).
    """
    update: dict[str, object] = {"version": task.version + 1, "updated_at": now}
    if task.enabled:
        if search is None:
            floor = _floor(task, now)
            following = _following(task.trigger, task.next_fire_at, calendar, floor, now)
        else:
            following = search(task)
        update |= {"next_fire_at": following, "next_run_at": run_instant(task, following)}
    new = task.model_copy(update=update)
    return new, calendar_replanned(task, new, versions, actor)


def _following(
    trigger: Trigger, due: datetime | None, calendar: Calendar, after: datetime, now: datetime
) -> datetime | None:
    calendars = {calendar.name: calendar}
    if due is not None and due <= now:
        return first_fire_at_or_after(trigger, due, calendars)
    return trigger.next_fire_time(after, calendars)


def _floor(task: Task, now: datetime) -> datetime:
    """What a new plan must come strictly after: now, or the task's last called run when
    a replica whose clock is ahead claimed it later than our now (the occurrence it ran
    is at or before its claim)."""
    last = task.last_run_at
    return now if last is None or last <= now else last


def calendar_name(task: Task) -> str | None:
    """The name of the calendar the task's trigger names, if any."""
    ref = task.trigger.calendar_ref()
    return None if ref is None else ref.name
