"""Keeping APScheduler's schedules in step with the task rows.

The rows are the truth. `plan()` compares every row with the schedule of the same id
and decides, without I/O, what to change; `apply()` makes the changes. A schedule is
armed afresh from the row (`next_fire_at`, `next_run_at`) whenever it and the row
disagree, so a resync never needs to know why they diverged: a task added, changed,
paused, resumed, spent or deleted, a claim by another replica, a clock that jumped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from apscheduler import AsyncScheduler, CoalescePolicy, ConflictPolicy, Schedule

from adapters.apscheduler.triggers import DomainTrigger
from application.calendars import SchedulerStore, calendars_for
from application.ports import TaskFilter, TaskPageKey, TaskStore
from domain.calendars import Calendar
from domain.tasks import Task

# The APScheduler task every schedule runs: the engine's claim pass.
EXECUTE = "imbi-scheduler.execute"
VERSION_KEY = "task_version"
PAGE = 500


@dataclass(slots=True)
class Plan:
    """What one resync changes. `deferred` counts schedules left alone because
    APScheduler was processing them at that moment (retried on the next resync)."""

    arm: list[Task] = field(default_factory=list)
    pause: list[str] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)
    deferred: int = 0

    def __bool__(self) -> bool:
        return bool(self.arm or self.pause or self.remove)


def plan(tasks: Iterable[Task], schedules: Iterable[Schedule], shift: timedelta) -> Plan:
    """Compare rows and schedules; `shift` is the clock bridge's current shift."""
    by_id = {schedule.id: schedule for schedule in schedules}
    result = Plan()
    for task in tasks:
        schedule = by_id.pop(str(task.id), None)
        action = _action(task, schedule, shift)
        if action is None:
            continue
        if schedule is not None and schedule.acquired_by is not None:
            result.deferred += 1
        elif action == "arm":
            result.arm.append(task)
        elif action == "pause":
            result.pause.append(str(task.id))
        else:
            result.remove.append(str(task.id))
    for stale in by_id.values():  # their task was deleted
        if stale.acquired_by is not None:
            result.deferred += 1
        else:
            result.remove.append(stale.id)
    return result


def _action(task: Task, schedule: Schedule | None, shift: timedelta) -> str | None:
    if not task.enabled:
        return "pause" if schedule is not None and not schedule.paused else None
    if task.next_run_at is None:  # spent or exhausted
        return "remove" if schedule is not None else None
    if schedule is None or schedule.paused:
        return "arm"
    trigger = schedule.trigger
    if (
        not isinstance(trigger, DomainTrigger)
        or trigger.shift != shift
        or schedule.metadata.get(VERSION_KEY) != task.version
    ):
        return "arm"
    wanted = task.next_run_at + shift
    if schedule.next_fire_time == wanted:
        return None
    # APScheduler already fired this occurrence: its job claims it.
    if schedule.last_fire_time is not None and schedule.last_fire_time >= wanted:
        return None
    return "arm"


def schedule_trigger(
    task: Task, shift: timedelta, calendars: Mapping[str, Calendar] | None = None
) -> DomainTrigger:
    """The trigger a schedule for `task` is armed with (`calendars`: those it names)."""
    return DomainTrigger(
        task.id, task.trigger, task.jitter_seconds, task.next_fire_at, shift, calendars
    )


async def apply(
    scheduler: AsyncScheduler,
    changes: Plan,
    shift: timedelta,
    calendars: Mapping[str, Calendar] | None = None,
) -> None:
    """Make the planned changes. The job of every schedule is `EXECUTE(task_id=...)`:
    the task id is the only argument APScheduler holds."""
    for task in changes.arm:
        await scheduler.add_schedule(
            EXECUTE,
            schedule_trigger(task, shift, calendars),
            id=str(task.id),
            kwargs={"task_id": str(task.id)},
            # Misfire and coalescing are our claim's decisions: one job per backlog,
            # never dropped by APScheduler for lateness.
            coalesce=CoalescePolicy.latest,
            misfire_grace_time=None,
            metadata={VERSION_KEY: task.version},
            conflict_policy=ConflictPolicy.replace,
        )
    for schedule_id in changes.pause:
        await scheduler.pause_schedule(schedule_id)
    for schedule_id in changes.remove:
        await scheduler.remove_schedule(schedule_id)


async def resync(store: SchedulerStore, scheduler: AsyncScheduler, shift: timedelta) -> Plan:
    """Read every task row, then plan and apply the changes; returns the plan."""
    tasks = await all_tasks(store)
    calendars = await calendars_for(store, *(task.trigger for task in tasks), strict=False)
    # Nothing between reading the schedules and applying the plan suspends on the
    # in-memory data store, so APScheduler cannot acquire a schedule in between.
    changes = plan(tasks, await scheduler.get_schedules(), shift)
    await apply(scheduler, changes, shift, calendars)
    return changes


async def all_tasks(store: TaskStore) -> list[Task]:
    """Every task row, a page at a time (a notification does not say which changed)."""
    tasks: list[Task] = []
    after: TaskPageKey | None = None
    while True:
        page = await store.list_tasks(TaskFilter(), after, PAGE)
        tasks.extend(page)
        if len(page) < PAGE:
            return tasks
        after = TaskPageKey(page[-1].created_at, page[-1].id)
