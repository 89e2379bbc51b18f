"""Recording a batch of outcomes: the arrays `finish_runs` unnests, and the failure
counts the batch leaves on its tasks.

`finish_run`'s rule, applied outcome by outcome in the order of the batch: a success
resets the task's `consecutive_failures`, a failure adds one and, on an enabled task,
reaching `pause_after_failures` pauses it; a CANCELLED outcome, a manual run and a run
that was no longer running count nothing. The counting is done here, on the task rows
`lock_counted_tasks` locked, so that the order of the outcomes decides, as it does when
they are recorded one by one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from domain.runs import Run, RunOutcome, RunStatus


@dataclass(slots=True)
class OutcomeBatch:
    """The first outcome given for each run, in the order given (a later outcome for
    the same run would find it finished, and change nothing)."""

    outcomes: dict[UUID, RunOutcome]

    @classmethod
    def of(cls, outcomes: Sequence[tuple[UUID, RunOutcome]]) -> OutcomeBatch:
        """Raises ValueError when an outcome is RUNNING."""
        first: dict[UUID, RunOutcome] = {}
        for run_id, outcome in outcomes:
            if outcome.status is RunStatus.RUNNING:
                raise ValueError("a run cannot finish as running")
            first.setdefault(run_id, outcome)
        return cls(first)

    def __bool__(self) -> bool:
        return bool(self.outcomes)

    @property
    def run_ids(self) -> list[UUID]:
        return list(self.outcomes)

    def params(self) -> dict[str, Any]:
        """The parameters of `finish_runs` (and, a subset, of `lock_counted_tasks`)."""
        outcomes = self.outcomes.values()
        return {
            "run_ids": self.run_ids,
            "status": [o.status.value for o in outcomes],
            "attempts": [o.attempts for o in outcomes],
            "http_status": [o.http_status for o in outcomes],
            "response_excerpt": [o.response_excerpt for o in outcomes],
            "error": [o.error for o in outcomes],
            "started_at": [o.started_at for o in outcomes],
            "finished_at": [o.finished_at for o in outcomes],
        }


@dataclass(slots=True)
class _Count:
    enabled: bool
    failures: int
    limit: int | None
    paused_at: datetime | None = None


def counted_failures(
    locked: Iterable[tuple[UUID, bool, int, int | None]], finished: Iterable[Run]
) -> dict[str, Any] | None:
    """The parameters of `count_outcomes` for the tasks whose count changed, or None.

    Args:
        locked: (id, enabled, consecutive_failures, pause_after_failures) of each task
            `lock_counted_tasks` locked; a task left out needs no write.
        finished: the runs this batch finished, in the order of the batch.
    """
    counts = {
        task_id: _Count(enabled, failures, limit) for task_id, enabled, failures, limit in locked
    }
    before = {task_id: count.failures for task_id, count in counts.items()}
    for run in finished:
        count = counts.get(run.task_id)
        if count is None or run.manual:
            continue
        if run.status is RunStatus.SUCCEEDED:
            count.failures = 0
        elif run.status is RunStatus.FAILED:
            count.failures += 1
            if count.enabled and count.limit is not None and count.failures >= count.limit:
                count.enabled = False
                count.paused_at = run.finished_at
    changed = {
        task_id: count
        for task_id, count in counts.items()
        if count.failures != before[task_id] or count.paused_at is not None
    }
    if not changed:
        return None
    return {
        "task_ids": list(changed),
        "failures": [count.failures for count in changed.values()],
        "paused_at": [count.paused_at for count in changed.values()],
    }
