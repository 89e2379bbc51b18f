"""Retention in memory: deleting, a batch at a time, the history and the runs older than
a cutoff."""

from __future__ import annotations

from datetime import datetime

from adapters.memory.state import MemoryStoreBase


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

    async def delete_runs_before(self, cutoff: datetime, batch: int) -> int:
        async with self._lock:
            old = sorted(
                (r for r in self._runs.values() if r.status.finished and r.scheduled_for < cutoff),
                key=lambda run: (run.scheduled_for, run.id),
            )[:batch]
            for run in old:
                del self._runs[run.id]
        return len(old)
