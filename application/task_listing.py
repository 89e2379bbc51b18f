"""`GET /tasks`: a page of tasks in creation order, and the cursor that carries the
filters to the next page (application/pagination.py)."""

from __future__ import annotations

from typing import Any

from application.pagination import (
    Page,
    instant_key,
    page_of,
    read_cursor,
    read_instant_key,
    same_filters,
)
from application.ports import TaskFilter, TaskPageKey, TaskStore
from domain.tasks import Task

# The list a task cursor belongs to (application/pagination.py).
TASKS = "tasks"


async def list_tasks(
    store: TaskStore, task_filter: TaskFilter, limit: int, cursor: str | None
) -> Page[Task]:
    """A page of at most `limit` tasks; a cursor replaces `task_filter` with its own.
    Raises InvalidRequest("cursor") for a cursor this list did not issue, or edited."""
    after = None
    if cursor is not None:
        carried, after = read_cursor(cursor, TASKS, _read)
        same_filters(_by_parameter(task_filter), _by_parameter(carried))
        task_filter = carried
    tasks = await store.list_tasks(task_filter, after, limit + 1)
    filters = {
        "enabled": task_filter.enabled,
        "tag": task_filter.tag,
        "name_prefix": task_filter.name_prefix,
    }
    return page_of(
        tasks,
        limit,
        TASKS,
        lambda last: {"filter": filters, "key": instant_key(last.created_at, last.id)},
    )


def _by_parameter(task_filter: TaskFilter) -> dict[str, Any]:
    """The filters by the query parameters of `GET /tasks`."""
    return {"enabled": task_filter.enabled, "tag": task_filter.tag, "name": task_filter.name_prefix}


def _read(payload: dict[str, Any]) -> tuple[TaskFilter, TaskPageKey]:
    task_filter = TaskFilter(**payload["filter"])
    if not _typed(task_filter.enabled, bool) or not all(
        _typed(text, str) for text in (task_filter.tag, task_filter.name_prefix)
    ):
        raise ValueError("a filter of the wrong type")
    return task_filter, TaskPageKey(*read_instant_key(payload["key"]))


def _typed(value: object, kind: type) -> bool:
    return value is None or isinstance(value, kind)
