"""Retention by count: which finished runs of a task are past its `history_limit`
(docs/api.md, "Task fields"; docs/storage.md, "Retention").

A task with a limit keeps its newest `history_limit` finished runs, newest by
(`scheduled_for`, `id`). Runs not finished yet (queued, running) are neither counted
nor removed: they are still to happen, and their outcome must land somewhere. Both
stores count, ask `history_trim` how many of each task's oldest finished runs go, and
delete those, a bounded batch per call.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from uuid import UUID

# The largest `history_limit`: a sweep reads up to this many runs of each limited task.
MAX_HISTORY_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class HistoryCount:
    """A task with a limit and its finished runs. A store may stop counting at
    `limit + batch`: past that, one batch removes as many as it could anyway."""

    task_id: UUID
    limit: int
    finished: int


def history_trim(counts: Iterable[HistoryCount], batch: int) -> dict[UUID, int]:
    """How many of each task's oldest finished runs go: those past its newest `limit`,
    at most `batch` in all, tasks by id (so that both stores take the same share; a
    task left over is trimmed by the next batch). Tasks with nothing to remove are
    absent."""
    trim: dict[UUID, int] = {}
    room = batch
    for count in sorted(counts, key=lambda c: c.task_id):
        if room <= 0:
            break
        over = min(count.finished - count.limit, room)
        if over > 0:
            trim[count.task_id] = over
            room -= over
    return trim
