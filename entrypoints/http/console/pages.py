"""The console's pages for reading: tasks, one task, one run, runs (calendars:
`calendar_pages`)."""

from __future__ import annotations

import asyncio
import json
from contextlib import suppress
from datetime import datetime, timezone
from typing import Annotated, Any
from urllib.parse import urlencode
from uuid import UUID

from litestar import Controller, Request, Response, get
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, QueryParameter

from adapters.http.requests import body_text
from application.backfills import BackfillService
from application.ports import TaskFilter
from application.scheduling import SchedulingService
from domain.errors import BackfillNotFound, InvalidRequest, RunNotFound, TaskNotFound
from domain.names import could_name_a_task
from domain.runs import Run, RunStatus
from domain.tasks import Task
from domain.validation import FieldError
from entrypoints.http.console.forms import form_instant, status_filter
from entrypoints.http.console.history import change_lines, without_literal_credentials
from entrypoints.http.console.pictures import (
    LISTED_FIRE_TIMES,
    STRIP_RUNS,
    run_strip,
    timeline,
)
from entrypoints.http.console.rendering import render
from entrypoints.http.console.words import (
    CALENDAR_POLICY_WORDS,
    lateness_words,
    took_words,
    trigger_words,
)

PAGE_SIZE = 50
RUNS_PAGE_SIZE = 25
HISTORY_PAGE_SIZE = 10
UPCOMING = 100  # the most the fire-time use case gives; the timeline shows a week of them
STATES = {"": None, "enabled": True, "paused": False}  # the form's `state`: enabled?
Text = Annotated[str, QueryParameter(max_length=200)]


def _now() -> datetime:
    return datetime.now(timezone.utc)


class TaskRow:
    """One line of the tasks page."""

    def __init__(self, task: Task, runs: list[Run]) -> None:
        self.task = task
        self.trigger_words = trigger_words(task.trigger)
        self.zone = task.trigger.timezone
        self.strip = run_strip(runs, self.zone)
        self.last = next((run for run in runs if run.status.finished), None)


class ConsolePages(Controller):
    path = "/"

    @get(["/", "/tasks"], name="console:tasks", include_in_schema=False)
    async def tasks(
        self,
        request: Request[Any, Any, Any],
        scheduling: NamedDependency[SchedulingService],
        name: Text = "",
        tag: Text = "",
        # Checked here, not by the parameter's type: its error would name `task_state`
        # (`state` is a name Litestar keeps for itself), not the form's `state`.
        task_state: Annotated[str, QueryParameter(name="state", max_length=20)] = "",
        cursor: Annotated[str | None, QueryParameter(max_length=2000)] = None,
        deleted: Text = "",
    ) -> Response[str]:
        rows: list[TaskRow] = []
        next_cursor = None
        errors = {}
        try:
            if task_state not in STATES:
                raise InvalidRequest("state", "must be enabled or paused (or empty: any)")
            task_filter = TaskFilter(STATES[task_state], tag.strip() or None, name.strip() or None)
            page = await scheduling.list_tasks(task_filter, PAGE_SIZE, cursor or None)
            recent = await scheduling.recent_runs([task.id for task in page.items], STRIP_RUNS)
            rows = [TaskRow(task, recent[task.id]) for task in page.items]
            next_cursor = page.next_cursor
        except InvalidRequest as exc:
            errors = {error.field: error.message for error in exc.errors}
        return render(
            request,
            "tasks.html",
            status_code=422 if errors else 200,
            errors=errors,
            rows=rows,
            filters={"name": name, "tag": tag, "state": task_state},
            query=_query(name=name, tag=tag, state=task_state),
            next_cursor=next_cursor,
            paged=cursor is not None,
            now=_now(),
            live=not errors,
            done=await _deleted_message(scheduling, deleted),
        )

    @get("/tasks/{ref:str}", name="console:task", include_in_schema=False)
    async def task(
        self,
        request: Request[Any, Any, Any],
        ref: FromPath[str],
        scheduling: NamedDependency[SchedulingService],
        status: FromQuery[RunStatus | None] = None,
        cursor: Annotated[str | None, QueryParameter(max_length=2000)] = None,
        done: Annotated[str | None, QueryParameter(max_length=40)] = None,
        history_cursor: Annotated[str | None, QueryParameter(max_length=2000)] = None,
    ) -> Response[str]:
        task = await scheduling.get_task(ref)
        runs = await scheduling.list_runs(task.id, status, RUNS_PAGE_SIZE, cursor or None)
        history = await scheduling.task_history(task.id, HISTORY_PAGE_SIZE, history_cursor or None)
        _, upcoming = await scheduling.upcoming_annotated(task.id, UPCOMING)
        now = _now()
        definition = without_literal_credentials(
            task.spec().model_dump(mode="json", exclude={"description"})
        )
        listed = upcoming.occurrences[:LISTED_FIRE_TIMES]
        # What does not fire among the fire times listed, not among all 100 fetched.
        through = listed[-1].at if listed else None
        omitted = [o for o in upcoming.omitted if through is not None and o.key <= through]
        # Told in time order and cut at the first 1,000: cut before `through` when none
        # of those told lies past it.
        omitted_cut = upcoming.omitted_truncated and len(omitted) == len(upcoming.omitted)
        return render(
            request,
            "task.html",
            task=task,
            trigger_words=trigger_words(task.trigger),
            calendar=task.trigger.calendar_ref(),
            calendar_policy_words=CALENDAR_POLICY_WORDS,
            zone=task.trigger.timezone,
            definition=json.dumps(definition, indent=2, ensure_ascii=False),
            upcoming=upcoming.occurrences,
            listed=listed,
            omitted=omitted,
            omitted_cut=omitted_cut,
            timeline=timeline(upcoming.occurrences, task.trigger.timezone, now, fetched=UPCOMING),
            runs=runs.items,
            next_cursor=runs.next_cursor,
            paged=cursor is not None,
            status=status.value if status else "",
            statuses=[s.value for s in RunStatus],
            done=done_message(done, paused=not task.enabled),
            history=[
                (version, change_lines(version.changes, created=version.version == 1))
                for version in history.items
            ],
            history_cursor=history.next_cursor,
            history_paged=history_cursor is not None,
            now=now,
            live=False,
        )

    # A link, not a form: it writes nothing, so Back, Forward and Reload show it again
    # without the browser asking to post anything (the other buttons redirect, 303).
    @get("/tasks/{ref:str}/dry-run", name="console:dry-run", include_in_schema=False)
    async def dry_run(
        self,
        request: Request[Any, Any, Any],
        ref: FromPath[str],
        scheduling: NamedDependency[SchedulingService],
    ) -> Response[str]:
        task = await scheduling.get_task(ref)
        rendered = await scheduling.dry_run(task.id)
        body = None if rendered.body is None else body_text(rendered.body)
        return render(request, "dry_run.html", task=task, rendered=rendered, body=body, live=False)

    @get("/runs/{run_id:str}", name="console:run", include_in_schema=False)
    async def run(
        self,
        request: Request[Any, Any, Any],
        run_id: FromPath[str],
        scheduling: NamedDependency[SchedulingService],
        done: Annotated[str | None, QueryParameter(max_length=40)] = None,
    ) -> Response[str]:
        try:
            run = await scheduling.get_run(UUID(run_id))
        except ValueError:
            raise RunNotFound(run_id) from None
        task = None
        with suppress(LookupError):  # a deleted task's runs stay readable
            task = await scheduling.get_task(run.task_id)
        zone = task.trigger.timezone if task else "UTC"
        lateness = (
            lateness_words((run.started_at - run.scheduled_for).total_seconds())
            if run.started_at
            else None
        )
        duration = (
            took_words((run.finished_at - run.started_at).total_seconds())
            if run.finished_at and run.started_at
            else None
        )
        return render(
            request,
            "run.html",
            run=run,
            task=task,
            zone=zone,
            lateness=lateness,
            duration=duration,
            done=done_message(
                done,
                cancelling=run.status is RunStatus.RUNNING,
                cancelled=run.status is RunStatus.CANCELLED,
            ),
            now=_now(),
            live=run.status is RunStatus.RUNNING,
        )

    @get("/runs", name="console:runs", include_in_schema=False)
    async def runs(
        self,
        request: Request[Any, Any, Any],
        scheduling: NamedDependency[SchedulingService],
        backfills: NamedDependency[BackfillService],
        status: Text = "",
        task: Text = "",
        tag: Text = "",
        since: Text = "",
        until: Text = "",
        backfill: Text = "",
        cursor: Annotated[str | None, QueryParameter(max_length=2000)] = None,
        cancelled: Annotated[int | None, QueryParameter(ge=0)] = None,
    ) -> Response[str]:
        runs: list[Run] = []
        next_cursor = None
        errors: dict[str, str] = {}
        try:
            wanted = _status(errors, status)
            since_at = _checked(errors, "since", since)
            until_at = _checked(errors, "until", until)
            if errors:
                raise InvalidRequest.of([FieldError(f, m) for f, m in errors.items()])
            page = await scheduling.list_all_runs(
                status=wanted,
                task=task.strip() or None,
                tag=tag.strip() or None,
                since=since_at,
                until=until_at,
                backfill=backfill.strip() or None,
                limit=RUNS_PAGE_SIZE * 2,
                cursor=cursor or None,
            )
            runs, next_cursor = page.items, page.next_cursor
        except InvalidRequest as exc:  # shown above the form, which keeps what was typed
            errors = {error.field: error.message for error in exc.errors}
        tasks = await _tasks_of(scheduling, runs)
        unknown_task = False
        if not runs and not errors and task.strip():  # none, or no such task?
            try:
                await scheduling.get_task(task.strip())
            except TaskNotFound:
                unknown_task = True
        made = None
        if backfill.strip() and not errors:  # its runs are listed: say what it is
            with suppress(BackfillNotFound):
                made = await backfills.get(backfill.strip())
        return render(
            request,
            "runs.html",
            made=made,
            unknown_task=unknown_task,
            cancelled=cancelled if made is not None else None,
            status_code=422 if errors else 200,
            errors=errors,
            rows=[(run, tasks.get(run.task_id)) for run in runs],
            filters={
                "task": task,
                "tag": tag,
                "since": since,
                "until": until,
                "backfill": backfill,
            },
            status=status,
            statuses=[s.value for s in RunStatus],
            query=_query(
                status=status,
                task=task,
                tag=tag,
                since=since,
                until=until,
                backfill=backfill,
            ),
            next_cursor=next_cursor,
            paged=cursor is not None,
            live=not errors,
        )


def _status(errors: dict[str, str], text: str) -> RunStatus | None:
    """The status filter, or None with its error added to `errors` (the list page names
    it, as it names a bad time)."""
    try:
        return status_filter(text, RunStatus)
    except InvalidRequest as exc:
        errors.update((error.field, error.message) for error in exc.errors)
        return None


def _checked(errors: dict[str, str], field: str, text: str) -> datetime | None:
    """A time filter, or None with its error added to `errors` (every bad one is named)."""
    try:
        return form_instant(field, text)
    except InvalidRequest as exc:  # say what was typed: a date-time input cannot show it
        errors[field] = f"{exc.message} (got {text.strip()!r})"
        return None


def _query(**filters: str) -> str:
    """The filters in use, as a query string for a page link: a cursor carries them
    too, but the form and the first page's link read them from the address."""
    return urlencode({name: value for name, value in filters.items() if value})


async def _tasks_of(scheduling: SchedulingService, runs: list[Run]) -> dict[UUID, Task]:
    """The tasks of a page of runs (each read once; a deleted task is left out)."""

    async def find(task_id: UUID) -> Task | None:
        try:
            return await scheduling.get_task(task_id)
        except TaskNotFound:
            return None

    ids = list(dict.fromkeys(run.task_id for run in runs))
    found = await asyncio.gather(*(find(task_id) for task_id in ids))
    return {task.id: task for task in found if task is not None}


async def _deleted_message(scheduling: SchedulingService, name: str) -> str | None:
    """The tasks page after a delete (`?deleted=<name>`), while no task has that name,
    and only for what could be one: a link must not make the page say other words."""
    if not could_name_a_task(name):
        return None
    try:
        await scheduling.get_task(name)
    except TaskNotFound:
        return f"Deleted {name}: it will not fire again; its runs stay on the runs page."
    return None


def done_message(
    done: str | None,
    *,
    paused: bool | None = None,
    cancelling: bool | None = None,
    cancelled: bool | None = None,
) -> str | None:
    """The words for `?done=` (fixed words: nothing a link carries is shown), only
    while the page's state still agrees with them: a link kept or shared after someone
    resumed the task must not say it is paused."""
    words: dict[str, str | None] = {
        "paused": "Paused: the task will not fire until it is resumed." if paused else None,
        "resumed": "Resumed: the task fires at its next time." if paused is False else None,
        "cancel-requested": (
            "Cancelled: the run was stopped and is recorded cancelled."
            if cancelled
            else "Cancel requested: the run stops shortly and is recorded cancelled."
            if cancelling
            else None
        ),
        "created": (
            "Created, paused: the task fires once it is resumed."
            if paused
            else "Created: the task fires at its next time."
        ),
        "saved": "Saved: the task runs by its new definition from now on.",
        "unchanged": "Nothing to save: the definition was the task's own.",
    }
    return words.get(done or "")
