"""`GET /tasks/{id}/explain?at=T`: what became of the occurrence at or just before T.

The trigger is the one in force at T (the task's history), whether the task was paused
is read at the occurrence, and the runs are those recorded for it (domain/explain.py
decides the verdict and its sentence).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from uuid import UUID

from application.calendars import SchedulerStore, calendars_for
from application.history import task_id_of
from application.ports import RunFilter, TaskStore
from domain.errors import InvalidRequest
from domain.explain import (
    Explanation,
    from_runs,
    latest_fire_at_or_before,
    not_scheduled,
    omitted_occurrence,
    paused_detail,
    spec_of,
    stamp,
)
from domain.history import TaskVersion
from domain.runs import Run
from domain.tasks import Task

# The instants explain looks around: a scheduler has nothing to say before the Unix
# epoch, and near the ends of datetime's range the search for an occurrence overflows.
_EXPLAIN_FROM = datetime(1970, 1, 1, tzinfo=UTC)
_EXPLAIN_UNTIL = datetime(9000, 1, 1, tzinfo=UTC)

# How far after an occurrence a run that folded it (coalesced, missed) is looked for.
FOLD_WINDOW = timedelta(days=31)


def explainable(instant: datetime) -> datetime:
    """`instant` (whole UTC seconds). Raises InvalidRequest naming `at` when it is
    outside the years 1970 to 8999."""
    if not _EXPLAIN_FROM <= instant < _EXPLAIN_UNTIL:
        raise InvalidRequest("at", "must be an instant from 1970 to 8999")
    return instant


async def explain(
    store: SchedulerStore,
    find_task: Callable[[str | UUID], Awaitable[Task]],
    ref: str | UUID,
    at: datetime,
    now: datetime,
) -> Explanation:
    """Raises TaskNotFound for an id or name that no task has or had."""
    task_id = await task_id_of(store, find_task, ref)
    in_force = await store.task_version_at(task_id, at)
    if in_force is None:
        return not_scheduled(None, f"the task did not exist at {stamp(at)}", None)
    spec = spec_of(in_force)
    if spec is None:
        return not_scheduled(None, f"the task was deleted at {stamp(in_force.at)}", in_force)
    # The calendar as it is now (calendars keep no history; one deleted since reads empty).
    calendars = await calendars_for(store, spec.trigger, strict=False)
    occurrence = latest_fire_at_or_before(spec.trigger, at, calendars)
    omitted = omitted_occurrence(spec.trigger, occurrence, at, calendars, in_force.version)
    if omitted is not None:
        return omitted
    if occurrence is None:
        detail = f"the trigger in force at {stamp(at)} had no fire time at or before it"
        return not_scheduled(None, detail, in_force)
    then = await store.task_version_at(task_id, occurrence)
    if then is None:
        return not_scheduled(occurrence, f"the task did not exist at {stamp(occurrence)}", None)
    spec_then = spec_of(then)
    if spec_then is not None and not spec_then.enabled:
        resumed = await _next_version(store, task_id, then)
        return not_scheduled(occurrence, paused_detail(then, resumed), then)
    if occurrence > now:
        return not_scheduled(occurrence, f"{stamp(occurrence)} is not due yet", in_force)
    runs = await _runs(store, RunFilter(task_id=task_id, since=occurrence, until=occurrence))
    later = None
    if not runs:
        window = RunFilter(
            task_id=task_id, since=occurrence + timedelta(seconds=1), until=occurrence + FOLD_WINDOW
        )
        after = [r for r in await _runs(store, window) if not r.manual]
        later = after[-1] if after else None  # newest first: the last is the next one
    in_flight = await _in_flight(store, task_id, runs[0]) if runs else []
    return from_runs(occurrence, runs, later, spec, in_flight, in_force.version)


async def _runs(store: TaskStore, run_filter: RunFilter) -> list[Run]:
    return await store.list_all_runs(run_filter, None, 500)


async def _in_flight(store: TaskStore, task_id: UUID, run: Run) -> list[Run]:
    """The task's runs that held a slot when `run` was claimed (for a skipped run)."""
    if run.status.value != "skipped":
        return []
    earlier = RunFilter(task_id=task_id, until=run.claimed_at)
    return [
        r
        for r in await _runs(store, earlier)
        if r.started_at is not None
        and r.started_at <= run.claimed_at
        and (r.finished_at is None or r.finished_at > run.claimed_at)
    ]


async def _next_version(
    store: TaskStore, task_id: UUID, version: TaskVersion
) -> TaskVersion | None:
    """The version after `version` (the one that resumed a paused task), if any."""
    newer = await store.task_history(task_id, None, 1000)
    after = [v for v in newer if v.version > version.version]
    return after[-1] if after else None
