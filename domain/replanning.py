"""Re-planning the tasks that name a calendar when it changes (docs/api.md, "Calendars").

Both stores apply `replanned_plans` to every task naming the calendar, in the transaction
that writes the change, so the rule is written once: the in-memory store through
`replanned_all` (whole tasks and their history versions), PostgreSQL on the few columns
a plan needs (`Plannable`), writing the history versions in SQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from uuid import UUID

from domain.calendars import Calendar
from domain.claims import first_fire_at_or_after, jitter_offset
from domain.history import TaskVersion, calendar_replanned
from domain.tasks import Task
from domain.triggers import Trigger


class Plannable(Protocol):
    """What a re-plan reads of a task (a `Task` is one)."""

    @property
    def id(self) -> UUID: ...
    @property
    def trigger(self) -> Trigger: ...
    @property
    def enabled(self) -> bool: ...
    @property
    def jitter_seconds(self) -> int: ...
    @property
    def next_fire_at(self) -> datetime | None: ...
    @property
    def last_run_at(self) -> datetime | None: ...
    @property
    def claimed_through(self) -> datetime | None: ...


@dataclass(frozen=True, slots=True)
class Plan:
    """A task's schedule after the change: its next (un-jittered) occurrence and run."""

    next_fire_at: datetime | None
    next_run_at: datetime | None


def replanned_plans(
    tasks: Iterable[Plannable], calendar: Calendar, now: datetime
) -> list[Plan | None]:
    """The plan of each of `tasks` under the changed `calendar`; None for a paused task,
    which stays unplanned (it is planned when resumed).

    An occurrence already due (`next_fire_at` at or before now, not claimed yet) stays
    due when the new calendar still lets it fire; otherwise the next occurrence is the
    first strictly after now, which a date the calendar no longer holds may bring closer
    than before. Never one at or before now that is not due, nor one at or before the
    task's last run: it may have fired already (in this very second, or claimed by a
    replica whose clock is ahead). Tasks whose trigger and schedule are equal (a fleet
    of tasks sharing one trigger, each with its own target) share one search.
    """
    found: dict[tuple[Trigger, bool, datetime], datetime | None] = {}
    plans: list[Plan | None] = []
    for task in tasks:
        if not task.enabled:
            plans.append(None)
            continue
        due = task.next_fire_at
        keeps_due = due is not None and due <= now
        floor = _floor(task, now)
        key = (task.trigger, keeps_due, due if due is not None and keeps_due else floor)
        if key not in found:
            found[key] = _following(task.trigger, due, calendar, floor, now)
        following = found[key]
        run = None
        if following is not None:
            run = following + jitter_offset(task.id, following, task.jitter_seconds)
        plans.append(Plan(following, run))
    return plans


def replanned_all(
    tasks: Iterable[Task],
    calendar: Calendar,
    versions: tuple[int, int],
    now: datetime,
    actor: str | None,
) -> list[tuple[Task, TaskVersion]]:
    """Each of `tasks` under the changed `calendar` (its versions before and after), at
    the next task version, and the history version that records it."""
    tasks = list(tasks)
    replanned = []
    for task, plan in zip(tasks, replanned_plans(tasks, calendar, now), strict=True):
        update: dict[str, object] = {"version": task.version + 1, "updated_at": now}
        if plan is not None:
            update |= {"next_fire_at": plan.next_fire_at, "next_run_at": plan.next_run_at}
        new = task.model_copy(update=update)
        replanned.append((new, calendar_replanned(task, new, versions, actor)))
    return replanned


def _following(
    trigger: Trigger, due: datetime | None, calendar: Calendar, after: datetime, now: datetime
) -> datetime | None:
    calendars = {calendar.name: calendar}
    if due is not None and due <= now:
        return first_fire_at_or_after(trigger, due, calendars)
    return trigger.next_fire_time(after, calendars)


def _floor(task: Plannable, now: datetime) -> datetime:
    """What a new plan must come strictly after: now, or what a replica whose clock is
    ahead claimed later than our now: the latest occurrence any claim took (whatever
    its run became) and the task's last called run (its occurrence is at or before it)."""
    marks = (task.last_run_at, task.claimed_through)
    return max((mark for mark in marks if mark is not None and mark > now), default=now)


def calendar_name(task: Task) -> str | None:
    """The name of the calendar the task's trigger names, if any."""
    ref = task.trigger.calendar_ref()
    return None if ref is None else ref.name
