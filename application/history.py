"""`GET /tasks/{id}/history`: a task's versions, newest first, paged by version."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from application.pagination import Page, page_of, read_cursor
from application.ports import TaskStore
from application.refs import as_uuid
from domain.errors import TaskNotFound
from domain.history import TaskVersion
from domain.tasks import Task


async def task_history(
    store: TaskStore,
    find_task: Callable[[str | UUID], Awaitable[Task]],
    ref: str | UUID,
    *,
    limit: int,
    cursor: str | None = None,
) -> Page[TaskVersion]:
    """The versions of the task `ref` names (its id or name), newest first. The history
    of a deleted task stays readable by its id, ending with its deletion. Raises
    TaskNotFound for an id or name that no task has or had."""
    task_id = await task_id_of(store, find_task, ref)
    listing = f"history of task {task_id}"
    before = None
    if cursor is not None:

        def read(payload: dict[str, Any]) -> int:
            version = payload["before"]
            if type(version) is not int or not 1 <= version <= 2**31 - 1:  # not a bool
                raise ValueError("not a version")
            return version

        before = read_cursor(cursor, listing, read)
    versions = await store.task_history(task_id, before, limit + 1)
    return page_of(versions, limit, listing, lambda last: {"before": last.version})


async def task_id_of(
    store: TaskStore, find_task: Callable[[str | UUID], Awaitable[Task]], ref: str | UUID
) -> UUID:
    try:
        return (await find_task(ref)).id
    except TaskNotFound:
        task_id = as_uuid(ref)
        if task_id is None or not await store.task_history(task_id, None, 1):
            raise
        return task_id
