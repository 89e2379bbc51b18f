"""Reading tasks on PostgreSQL: by id or name, pages of them, their history, the next
due time."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from adapters.postgres.queries import scope_params
from adapters.postgres.rows import to_task, to_version
from adapters.postgres.transactions import PostgresStoreBase
from application.ports import HoldScope, TaskFilter, TaskPageKey
from domain.errors import TaskNotFound
from domain.history import TaskVersion
from domain.tasks import Task


class TaskReads(PostgresStoreBase):
    """The task reads of `PostgresTaskStore`."""

    async def get_task(self, task_id: UUID) -> Task:
        row = await self._one("get_task", {"id": task_id})
        if row is None:
            raise TaskNotFound(task_id)
        return to_task(row)

    async def get_task_by_name(self, name: str) -> Task:
        row = await self._one("get_task_by_name", {"name": name})
        if row is None:
            raise TaskNotFound(name)
        return to_task(row)

    async def list_tasks(
        self, task_filter: TaskFilter, after: TaskPageKey | None, limit: int
    ) -> list[Task]:
        rows = await self._all(
            "list_tasks",
            {
                "enabled": task_filter.enabled,
                "tag": task_filter.tag,
                "prefix": task_filter.name_prefix,
                "after_created_at": after.created_at if after else None,
                "after_id": after.id if after else None,
                "limit": limit,
            },
        )
        return [to_task(row) for row in rows]

    async def tasks_covered(self, scope: HoldScope) -> list[Task]:
        return [to_task(row) for row in await self._all("tasks_covered", scope_params(scope))]

    async def task_history(
        self, task_id: UUID, before_version: int | None, limit: int
    ) -> list[TaskVersion]:
        params = {"task_id": task_id, "before": before_version, "limit": limit}
        return [to_version(row) for row in await self._all("task_history", params)]

    async def task_version_at(self, task_id: UUID, at: datetime) -> TaskVersion | None:
        row = await self._one("task_version_at", {"task_id": task_id, "at": at})
        return None if row is None else to_version(row)

    async def next_due_at(self) -> datetime | None:
        row = await self._one("next_due_at", {})
        return None if row is None else row["min"]
