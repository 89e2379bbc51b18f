"""`GET /tasks/{id}/explain?at=T`: what became of the occurrence at or just before T.

The trigger is the one in force at T (the task's history), whether the task was paused
is read at the occurrence, and the runs are those recorded for it (domain/explain.py
decides the verdict and its sentence).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import UUID

from application.calendars import SchedulerStore, calendars_for
from application.history import task_id_of
from application.ports import RunFilter, RunPageKey, TaskStore
from domain.errors import InvalidRequest, TaskNotFound
from domain.explain import (
    Explanation,
    Verdict,
    backfilled,
    folded_into,
    from_runs,
    latest_fire_at_or_before,
    not_scheduled,
    omitted_occurrence,
    paused_detail,
    spec_of,
    stamp,
    unscheduled_by,
)
from domain.history import TaskVersion
from domain.runs import Run
from domain.tasks import Task, TaskSpec

# The instants explain looks around: a scheduler has nothing to say before the Unix
# epoch, and near the ends of datetime's range the search for an occurrence overflows.
_EXPLAIN_FROM = datetime(1970, 1, 1, tzinfo=UTC)
_EXPLAIN_UNTIL = datetime(9000, 1, 1, tzinfo=UTC)

# How far after an occurrence a run that folded it (coalesced, missed) is looked for.
FOLD_WINDOW = timedelta(days=31)
_PAGE = 500


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
        return await _before_the_task(store, task_id, at)
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
    spec_then = None if then is None else spec_of(then)
    if then is None or (spec_then is not None and not spec_then.enabled):
        # Not scheduled then; but a backfill may have run the occurrence since, or it
        # was claimed before a pause in its own second.
        at_it = await _runs(store, _at(task_id, occurrence))
        made = [run for run in at_it if not run.manual] or backfilled(at_it)
        if made:
            return from_runs(occurrence, made, None, spec, [], in_force.version)
        if then is None:  # the occurrence came before the task; `at` did not
            detail = f"the task did not exist at {stamp(occurrence)}"
            return not_scheduled(occurrence, detail, in_force)
        resumed = await _next_version(store, task_id, then)
        return not_scheduled(occurrence, paused_detail(then, resumed), then)
    if occurrence > now:
        return not_scheduled(occurrence, f"{stamp(occurrence)} is not due yet", in_force)
    runs = await _runs(store, _at(task_id, occurrence))
    later = None
    if not runs and spec_then is not None:
        before = await _previous_version(store, task_id, then)
        calendars_then = await calendars_for(store, spec_then.trigger, strict=False)
        why = unscheduled_by(then, before, occurrence, spec_then.trigger, calendars_then)
        if why is not None:
            return not_scheduled(occurrence, why, then)
        later = await _next_scheduled_run(store, task_id, occurrence)
        if later is not None and not folded_into(spec.trigger, occurrence, later, calendars):
            later = None
    in_flight = await _in_flight(store, task_id, runs[0]) if runs else []
    explained = from_runs(occurrence, runs, later, spec, in_flight, in_force.version)
    if explained.verdict is Verdict.MISSED and not explained.runs:
        explained = await _pruned(store, explained, task_id, occurrence)
        return await _calendar_gone(store, explained, spec_then or spec)
    return explained


async def _pruned(
    store: SchedulerStore, explained: Explanation, task_id: UUID, occurrence: datetime
) -> Explanation:
    """A run not recorded, for a task that keeps only its newest runs (`history_limit`):
    when none of its runs from before the occurrence is left either, the sweep, which
    removes the oldest first, may have removed the occurrence's own. Say so."""
    try:
        task = await store.get_task(task_id)
    except TaskNotFound:
        return explained
    if task.history_limit is None:
        return explained
    older = RunFilter(task_id=task_id, until=occurrence - timedelta(seconds=1))
    if await store.list_all_runs(older, None, 1):
        return explained  # the sweep has not come this far back
    detail = (
        f"missed: no run is kept for it; the task keeps only its newest "
        f"{task.history_limit} finished runs (history_limit) and none from before it is "
        "left: if a run was made for it, it was removed since"
    )
    return replace(explained, detail=detail)


async def _calendar_gone(
    store: SchedulerStore, explained: Explanation, spec: TaskSpec
) -> Explanation:
    """A run not recorded, for a trigger naming a calendar deleted since: that calendar
    may have held the date (calendars keep no history, and one gone reads as holding
    none), so "missed" is not the whole story: say so."""
    ref = spec.trigger.calendar_ref()
    if ref is None or ref.name in await store.calendars_named([ref.name]):
        return explained
    detail = (
        f"{explained.detail}; the trigger named calendar {ref.name}, deleted since "
        f"(calendars keep no history): if it held that date, nothing was due"
    )
    return replace(explained, detail=detail)


async def _before_the_task(store: SchedulerStore, task_id: UUID, at: datetime) -> Explanation:
    """An instant before the task existed: nothing was scheduled then, but a backfill
    may have run the occurrence since, under the trigger of the task as it was when the
    backfill was made: the one it was created with, or a later one (the newest run
    before `at`, a backfill's, says which)."""
    # Versions count from 1, one per change: version 1 is the only one before version 2.
    versions = await store.task_history(task_id, 2, 1)
    if versions and (found := await _backfilled_under(store, task_id, at, versions[0])):
        return found
    newest = await store.list_all_runs(RunFilter(task_id=task_id, until=at), None, 1)
    if newest and newest[0].backfill_id is not None:
        then = await store.task_version_at(task_id, newest[0].claimed_at)
        tried = versions[0].version if versions else None
        untried = then is not None and then.version != tried
        if then and untried and (found := await _backfilled_under(store, task_id, at, then)):
            return found
    return not_scheduled(None, f"the task did not exist at {stamp(at)}", None)


async def _backfilled_under(
    store: SchedulerStore, task_id: UUID, at: datetime, version: TaskVersion
) -> Explanation | None:
    """The occurrence at or before `at` under `version`'s trigger, when a backfill ran
    it; else None."""
    spec = spec_of(version)
    if spec is None:
        return None
    calendars = await calendars_for(store, spec.trigger, strict=False)
    occurrence = latest_fire_at_or_before(spec.trigger, at, calendars)
    if occurrence is None:
        return None
    made = backfilled(await _runs(store, _at(task_id, occurrence)))
    if not made:
        return None
    # A backfill ran the fire time before `at`; a wall time after it that did not fire
    # (a DST gap, a calendar date) is the occurrence just before `at`, as for an instant
    # the task knew.
    omitted = omitted_occurrence(spec.trigger, occurrence, at, calendars, version.version)
    return omitted or from_runs(occurrence, made, None, spec, [], version.version)


async def _next_scheduled_run(store: TaskStore, task_id: UUID, occurrence: datetime) -> Run | None:
    """The first run not made by hand scheduled after `occurrence`, within FOLD_WINDOW.
    Runs are listed newest first, so it is the last of its window: the window grows from
    a minute (tenfold each time) until it holds one, and that window is read to its end,
    a page at a time. Reading the whole FOLD_WINDOW at once found, for a task firing
    every second, only the newest 500 runs, and took the oldest of those."""
    span = timedelta(minutes=1)
    while True:
        window = RunFilter(
            task_id=task_id, since=occurrence + timedelta(seconds=1), until=occurrence + span
        )
        found: Run | None = None
        key: RunPageKey | None = None
        while True:
            page = await store.list_all_runs(window, key, _PAGE)
            found = next((r for r in reversed(page) if not r.manual), found)
            if len(page) < _PAGE:
                break
            key = RunPageKey(page[-1].scheduled_for, page[-1].id)
        if found is not None or span >= FOLD_WINDOW:
            return found
        span = min(span * 10, FOLD_WINDOW)


def _at(task_id: UUID, occurrence: datetime) -> RunFilter:
    return RunFilter(task_id=task_id, since=occurrence, until=occurrence)


async def _runs(store: TaskStore, run_filter: RunFilter) -> list[Run]:
    return await store.list_all_runs(run_filter, None, _PAGE)


async def _in_flight(store: TaskStore, task_id: UUID, run: Run) -> list[Run]:
    """The task's runs that held a slot, or waited in its queue for one, when `run` was
    claimed (for a skipped run): claimed by then, and not yet finished."""
    if run.status.value != "skipped":
        return []
    at = run.claimed_at
    earlier = RunFilter(task_id=task_id, until=at)
    return [
        r
        for r in await _runs(store, earlier)
        if r.id != run.id and r.claimed_at <= at and (r.finished_at is None or r.finished_at > at)
    ]


async def _previous_version(
    store: TaskStore, task_id: UUID, version: TaskVersion
) -> TaskSpec | None:
    """The task as the version before `version` left it (None: none, or deleted)."""
    if version.version <= 1:
        return None
    before = await store.task_history(task_id, version.version, 1)  # the newest before it
    return spec_of(before[0]) if before else None


async def _next_version(
    store: TaskStore, task_id: UUID, version: TaskVersion
) -> TaskVersion | None:
    """The version after `version` (the one that resumed a paused task), if any."""
    # Versions go up by one per change: the next is the newest below version + 2.
    newer = await store.task_history(task_id, version.version + 2, 1)
    after = [v for v in newer if v.version > version.version]
    return after[0] if after else None
