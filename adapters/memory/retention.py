"""Retention in memory: deleting, a batch at a time, the history and the runs older than
a cutoff, and the runs past their task's `history_limit`."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from uuid import UUID

from adapters.memory.state import MemoryStoreBase
from domain.retention import HistoryCount, history_trim
from domain.runs import Run


class Retention(MemoryStoreBase):
    """The retention deletes of `InMemoryTaskStore`."""

    async def delete_history_before(self, cutoff: datetime, batch: int) -> int:
        async with self._lock:
            old = sorted(
                (
                    (version.at, task_id, version.version)
                    for task_id, versions in self._history.items()
                    for i, version in enumerate(versions)
                    if version.at < cutoff
                    and (
                        version.state is None
                        or any(later.at <= cutoff for later in versions[i + 1 :])
                    )
                ),
            )[:batch]
            for _, task_id, number in old:
                kept = [v for v in self._history[task_id] if v.version != number]
                if kept:
                    self._history[task_id] = kept
                else:
                    del self._history[task_id]
        return len(old)

    async def end_stalled_transactions(self, older_than: timedelta) -> int:
        # Nothing here outlives the call that made it.
        return 0

    async def drop_runs_before(self, cutoff: datetime, now: datetime) -> int:
        # No partitions in memory: delete_runs_before removes the same runs.
        return 0

    async def delete_runs_before(self, cutoff: datetime, batch: int) -> int:
        async with self._lock:
            old = sorted(
                (r for r in self._runs.values() if r.status.finished and r.scheduled_for < cutoff),
                key=lambda run: (run.scheduled_for, run.id),
            )[:batch]
            for run in old:
                del self._runs[run.id]
        return len(old)

    async def delete_runs_over_limit(self, batch: int) -> int:
        async with self._lock:
            limits = {t.id: t.history_limit for t in self._tasks.values() if t.history_limit}
            finished: dict[UUID, list[Run]] = defaultdict(list)
            for run in self._runs.values():
                if run.task_id in limits and run.status.finished:
                    finished[run.task_id].append(run)
            counts = [HistoryCount(t, limit, len(finished[t])) for t, limit in limits.items()]
            deleted = 0
            for task_id, over in history_trim(counts, batch).items():
                oldest = sorted(finished[task_id], key=lambda run: (run.scheduled_for, run.id))
                for run in oldest[:over]:
                    del self._runs[run.id]
                deleted += over
        return deleted
