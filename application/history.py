"""`GET /tasks/{id}/history`: a task's versions, newest first, paged by version."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from uuid import UUID

from application.pagination import Page, decode_cursor, encode_cursor
from application.ports import TaskStore
from domain.errors import InvalidRequest, TaskNotFound
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
    before = None
    if cursor is not None:
        payload = decode_cursor(cursor)
        try:
            if UUID(payload["task_id"]) != task_id:
                raise ValueError("a cursor of another task")
            before = payload["before"]
            if not isinstance(before, int) or not 1 <= before <= 2**31 - 1:
                raise ValueError("not a version")
        except (KeyError, TypeError, ValueError):
            raise InvalidRequest("cursor", "is not a history cursor of this task") from None
    versions = await store.task_history(task_id, before, limit + 1)
    if len(versions) <= limit:
        return Page(versions, None)
    versions = versions[:limit]
    cursor = encode_cursor({"task_id": str(task_id), "before": versions[-1].version})
    return Page(versions, cursor)


async def task_id_of(
    store: TaskStore, find_task: Callable[[str | UUID], Awaitable[Task]], ref: str | UUID
) -> UUID:
    try:
        return (await find_task(ref)).id
    except TaskNotFound:
        task_id = ref if isinstance(ref, UUID) else _uuid(ref)
        if task_id is None or not await store.task_history(task_id, None, 1):
            raise
        return task_id


def _uuid(value: str) -> UUID | None:
    try:
        return UUID(value)
    except ValueError:
        return None
