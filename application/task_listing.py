"""`GET /tasks`: a page of tasks in creation order, and the cursor that carries the
filters to the next page (application/pagination.py)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from application.pagination import Page, decode_cursor, encode_cursor
from application.ports import TaskFilter, TaskPageKey, TaskStore
from domain.errors import InvalidRequest
from domain.tasks import Task


async def list_tasks(
    store: TaskStore, task_filter: TaskFilter, limit: int, cursor: str | None
) -> Page[Task]:
    """A page of at most `limit` tasks; a cursor replaces `task_filter` with its own.
    Raises InvalidRequest("cursor") for a cursor this service did not issue."""
    after = None
    if cursor is not None:
        task_filter, after = _decode(cursor)
    tasks = await store.list_tasks(task_filter, after, limit + 1)
    if len(tasks) <= limit:
        return Page(tasks, None)
    tasks = tasks[:limit]
    last = tasks[-1]
    filters = {
        "enabled": task_filter.enabled,
        "tag": task_filter.tag,
        "name_prefix": task_filter.name_prefix,
    }
    key = [last.created_at.isoformat(), str(last.id)]
    return Page(tasks, encode_cursor({"filter": filters, "key": key}))


def _decode(cursor: str) -> tuple[TaskFilter, TaskPageKey]:
    payload = decode_cursor(cursor)
    try:
        task_filter = TaskFilter(**payload["filter"])
        if not _typed(task_filter.enabled, bool) or not all(
            _typed(text, str) for text in (task_filter.tag, task_filter.name_prefix)
        ):
            raise ValueError("a filter of the wrong type")
        instant, task_id = payload["key"]
        return task_filter, TaskPageKey(datetime.fromisoformat(instant), UUID(task_id))
    except (KeyError, TypeError, ValueError):
        raise InvalidRequest("cursor", "is not a task cursor") from None


def _typed(value: object, kind: type) -> bool:
    return value is None or isinstance(value, kind)
