"""Reading runs in memory: one by id, a task's pages, `GET /runs` pages, the recent
runs of tasks."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from adapters.memory.state import MemoryStoreBase
from application.ports import RunFilter, RunPageKey
from domain.runs import Run, RunStatus


class RunReads(MemoryStoreBase):
    """The run reads of `InMemoryTaskStore`."""

    async def get_run(self, run_id: UUID) -> Run:
        return self._run(run_id)

    async def recent_runs(self, task_ids: Sequence[UUID], limit: int) -> dict[UUID, list[Run]]:
        wanted = set(task_ids)
        recent: dict[UUID, list[Run]] = {task_id: [] for task_id in task_ids}
        for run in sorted(
            (run for run in self._runs.values() if run.task_id in wanted),
            key=lambda run: (run.scheduled_for, run.id),
            reverse=True,
        ):
            if len(recent[run.task_id]) < limit:
                recent[run.task_id].append(run)
        return recent

    async def list_runs(
        self, task_id: UUID, status: RunStatus | None, after: RunPageKey | None, limit: int
    ) -> list[Run]:
        start = None if after is None else (after.scheduled_for, after.id)
        found = sorted(
            (
                run
                for run in self._runs.values()
                if run.task_id == task_id
                and (status is None or run.status is status)
                and (start is None or (run.scheduled_for, run.id) < start)
            ),
            key=lambda run: (run.scheduled_for, run.id),
            reverse=True,
        )
        return found[:limit]

    async def list_all_runs(
        self, run_filter: RunFilter, after: RunPageKey | None, limit: int
    ) -> list[Run]:
        tagged = None
        if run_filter.tag is not None:
            tagged = {t.id for t in self._tasks.values() if run_filter.tag in t.tags}
        start = None if after is None else (after.scheduled_for, after.id)
        found = sorted(
            (
                run
                for run in self._runs.values()
                if _run_matches(run, run_filter)
                and (tagged is None or run.task_id in tagged)
                and (start is None or (run.scheduled_for, run.id) < start)
            ),
            key=lambda run: (run.scheduled_for, run.id),
            reverse=True,
        )
        return found[:limit]


def _run_matches(run: Run, run_filter: RunFilter) -> bool:
    return (
        (run_filter.status is None or run.status is run_filter.status)
        and (run_filter.task_id is None or run.task_id == run_filter.task_id)
        and (run_filter.since is None or run.scheduled_for >= run_filter.since)
        and (run_filter.until is None or run.scheduled_for <= run_filter.until)
        and (run_filter.backfill_id is None or run.backfill_id == run_filter.backfill_id)
    )
