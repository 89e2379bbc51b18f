"""Reading tasks in memory: by id or name, pages of them, their history, the next due
time."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from adapters.memory.state import MemoryStoreBase, copy_task
from application.ports import HoldScope, TaskFilter, TaskPageKey
from domain.errors import (
    TaskNotFound,
)
from domain.history import TaskVersion
from domain.tasks import Task


class TaskReads(MemoryStoreBase):
    """The task reads of `InMemoryTaskStore`."""

    async def get_task(self, task_id: UUID) -> Task:
        return copy_task(self._task(task_id))

    async def get_task_by_name(self, name: str) -> Task:
        task_id = self._names.get(name)
        if task_id is None:
            raise TaskNotFound(name)
        return copy_task(self._task(task_id))

    async def list_tasks(
        self, task_filter: TaskFilter, after: TaskPageKey | None, limit: int
    ) -> list[Task]:
        start = None if after is None else (after.created_at, after.id)
        found = sorted(
            (
                task
                for task in self._tasks.values()
                if _matches(task, task_filter)
                and (start is None or (task.created_at, task.id) > start)
            ),
            key=lambda task: (task.created_at, task.id),
        )
        return [copy_task(task) for task in found[:limit]]

    async def tasks_covered(self, scope: HoldScope) -> list[Task]:
        covered = sorted((t for t in self._tasks.values() if scope.covers(t)), key=lambda t: t.id)
        return [copy_task(task) for task in covered]

    async def task_history(
        self, task_id: UUID, before_version: int | None, limit: int
    ) -> list[TaskVersion]:
        versions = reversed(self._history.get(task_id, []))
        found = [v for v in versions if before_version is None or v.version < before_version]
        return found[:limit]

    async def task_version_at(self, task_id: UUID, at: datetime) -> TaskVersion | None:
        made = [v for v in self._history.get(task_id, []) if v.at <= at]
        return made[-1] if made else None

    async def next_due_at(self) -> datetime | None:
        due = [t.next_run_at for t in self._tasks.values() if t.enabled and t.next_run_at]
        return min(due, default=None)


def _matches(task: Task, task_filter: TaskFilter) -> bool:
    if task_filter.enabled is not None and task.enabled is not task_filter.enabled:
        return False
    if task_filter.tag is not None and task_filter.tag not in task.tags:
        return False
    prefix = task_filter.name_prefix
    return prefix is None or task.name.startswith(prefix)
