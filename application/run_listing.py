"""`GET /runs` (the runs of every task, filtered) and `GET /tasks/{id}/runs` (one task's):
newest first, keyset-paged by (scheduled_for, id)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any
from uuid import UUID

from application.pagination import (
    Page,
    instant_key,
    page_of,
    read_cursor,
    read_instant,
    read_instant_key,
    read_text,
    read_uuid,
    same_filters,
)
from application.ports import RunFilter, RunPageKey, TaskStore
from application.refs import as_uuid
from domain.errors import InvalidRequest, TaskNotFound
from domain.runs import Run, RunStatus
from domain.tasks import Task

# The list a cursor of `GET /runs` belongs to (application/pagination.py).
ALL_RUNS = "runs"


async def list_all_runs(
    store: TaskStore,
    find_task: Callable[[str], Awaitable[Task]],
    *,
    status: RunStatus | None = None,
    task: str | None = None,
    tag: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    backfill: str | None = None,
    limit: int,
    cursor: str | None = None,
) -> Page[Run]:
    """One page of runs across tasks. `task` is an id (also of a deleted task: its runs
    stay) or the name of a task that exists; a name nobody has matches no run. A cursor
    carries the filters of the first page, the task as its id: filters sent beside it
    must be those (`same_filters`)."""
    for field, instant in (("since", since), ("until", until)):
        if instant is not None and instant.tzinfo is None:
            raise InvalidRequest(field, "must carry a UTC offset")
    if since is not None and until is not None and until < since:
        raise InvalidRequest("until", "must not be before since")
    task_id = None
    if task is not None:
        task_id = as_uuid(task)
        if task_id is None:
            try:
                task_id = (await find_task(task)).id
            except TaskNotFound:
                if cursor is None:
                    return Page([], None)
    backfill_id = None
    if backfill is not None:
        backfill_id = as_uuid(backfill)
        if backfill_id is None:
            raise InvalidRequest("backfill", "must be a backfill id (a UUID)")
    run_filter = RunFilter(status, task_id, tag, since, until, backfill_id)
    after = None
    if cursor is not None:
        carried, after = read_cursor(cursor, ALL_RUNS, _read)
        sent = _by_parameter(run_filter)
        if task is not None and task_id != carried.task_id:  # named as it was sent
            sent["task"] = task
        same_filters(sent, _by_parameter(carried))
        run_filter = carried
    runs = await store.list_all_runs(run_filter, after, limit + 1)
    filters = _encode_filter(run_filter)
    return page_of(
        runs,
        limit,
        ALL_RUNS,
        lambda last: {"filter": filters, "key": instant_key(last.scheduled_for, last.id)},
    )


async def list_task_runs(
    store: TaskStore, task_id: UUID, status: RunStatus | None, limit: int, cursor: str | None
) -> Page[Run]:
    """One page of a task's runs; a cursor (of this task's runs only) carries the
    `status` of the first page."""
    listing = f"runs of task {task_id}"
    after = None
    if cursor is not None:
        carried, after = read_cursor(cursor, listing, _read_task_runs)
        same_filters({"status": status}, {"status": carried})
        status = carried
    runs = await store.list_runs(task_id, status, after, limit + 1)
    listed = status.value if status else None
    return page_of(
        runs,
        limit,
        listing,
        lambda last: {"status": listed, "key": instant_key(last.scheduled_for, last.id)},
    )


def _read_task_runs(payload: dict[str, Any]) -> tuple[RunStatus | None, RunPageKey]:
    status = RunStatus(payload["status"]) if payload["status"] is not None else None
    return status, RunPageKey(*read_instant_key(payload["key"]))


def _by_parameter(run_filter: RunFilter) -> dict[str, Any]:
    """The filters by the query parameters of `GET /runs`."""
    return {
        "status": run_filter.status,
        "task": run_filter.task_id,
        "tag": run_filter.tag,
        "since": run_filter.since,
        "until": run_filter.until,
        "backfill": run_filter.backfill_id,
    }


def _encode_filter(run_filter: RunFilter) -> dict[str, Any]:
    def text(value: object) -> str | None:
        if value is None:
            return None
        return value.isoformat() if isinstance(value, datetime) else str(value)

    return {
        "status": text(run_filter.status),
        "task_id": text(run_filter.task_id),
        "tag": run_filter.tag,
        "since": text(run_filter.since),
        "until": text(run_filter.until),
        "backfill_id": text(run_filter.backfill_id),
    }


def _read(payload: dict[str, Any]) -> tuple[RunFilter, RunPageKey]:
    raw = payload["filter"]
    key = read_instant_key(payload["key"])

    def maybe(name: str, parse: Callable[[str], Any]) -> Any:
        value = raw[name]
        return None if value is None else parse(value)

    run_filter = RunFilter(
        status=maybe("status", RunStatus),
        task_id=maybe("task_id", read_uuid),
        tag=maybe("tag", read_text),
        since=maybe("since", read_instant),
        until=maybe("until", read_instant),
        backfill_id=maybe("backfill_id", read_uuid),
    )
    return run_filter, RunPageKey(*key)
