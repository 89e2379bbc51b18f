"""Reading runs on PostgreSQL: one by id, a task's pages, `GET /runs` pages, the
recent runs of tasks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from adapters.postgres.rows import to_run
from adapters.postgres.run_listing import reads_per_task, run_listing, tagged_tasks
from adapters.postgres.transactions import PostgresStoreBase
from application.ports import RunFilter, RunPageKey
from domain.errors import RunNotFound
from domain.runs import Run, RunStatus


class RunReads(PostgresStoreBase):
    """The run reads of `PostgresTaskStore`."""

    async def get_run(self, run_id: UUID) -> Run:
        row = await self._one("get_run", {"id": run_id})
        if row is None:
            raise RunNotFound(run_id)
        return to_run(row)

    async def list_runs(
        self, task_id: UUID, status: RunStatus | None, after: RunPageKey | None, limit: int
    ) -> list[Run]:
        params: dict[str, Any] = {
            "task_id": task_id,
            "status": None if status is None else status.value,
            "limit": limit,
        }
        if after is None:
            rows = await self._all("list_runs", params)
        else:
            params |= {"after_scheduled_for": after.scheduled_for, "after_id": after.id}
            rows = await self._all("list_runs_after", params)
        return [to_run(row) for row in rows]

    async def list_all_runs(
        self, run_filter: RunFilter, after: RunPageKey | None, limit: int
    ) -> list[Run]:
        per_task = False
        if run_filter.tag is not None and run_filter.task_id is None:
            counts = await self._read(tagged_tasks(self.schema), {"tag": run_filter.tag})
            tagged, tasks = counts[0]["tagged"], counts[0]["tasks"]
            if not tagged:
                return []
            per_task = reads_per_task(tagged, tasks)
        query, params = run_listing(self.schema, run_filter, after, limit, per_task=per_task)
        rows = await self._read(query, params)
        return [to_run(row) for row in rows]

    async def recent_runs(self, task_ids: Sequence[UUID], limit: int) -> dict[UUID, list[Run]]:
        recent: dict[UUID, list[Run]] = {task_id: [] for task_id in task_ids}
        if recent:
            rows = await self._all("recent_runs", {"task_ids": list(recent), "limit": limit})
            for row in rows:
                run = to_run(row)
                recent[run.task_id].append(run)
        return recent
