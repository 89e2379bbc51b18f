"""The outcome rule: what recording how a run ended does to the run and to its task.

Every store applies these functions to the rows it locked, so the rule is written
once: `finished` sets a finished run's fields, `count_outcomes` counts a batch of
finished runs on their tasks (consecutive failures, `pause_after_failures`). The stores
only lock, read and write what these decided.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from uuid import UUID

from domain.runs import Run, RunOutcome, RunStatus
from domain.tasks import Task


def check_outcome(outcome: RunOutcome) -> None:
    """Raises ValueError when `outcome` does not end a run (it says RUNNING)."""
    if outcome.status is RunStatus.RUNNING:
        raise ValueError("a run cannot finish as running")


def finished_fields(outcome: RunOutcome) -> dict[str, Any]:
    """The fields a running run takes when `outcome` ends it. `started_at` is left
    out when the outcome does not say (the run keeps the instant it was claimed)."""
    fields: dict[str, Any] = {
        "status": outcome.status,
        "attempts": outcome.attempts,
        "http_status": outcome.http_status,
        "response_excerpt": _storable(outcome.response_excerpt),
        "error": _storable(outcome.error),
        "finished_at": outcome.finished_at,
    }
    if outcome.started_at is not None:
        fields["started_at"] = outcome.started_at
    return fields


def _storable(text: str | None) -> str | None:
    # Text from a target or its errors: no store holds U+0000 (docs/api.md, "Text").
    return None if text is None else text.replace("\x00", "\ufffd")


def finished(run: Run, outcome: RunOutcome) -> Run:
    """`run` ended by `outcome`."""
    return run.model_copy(update=finished_fields(outcome))


def counts(run: Run) -> bool:
    """Whether a finished run counts on its task's failures: only a scheduled run that
    succeeded or failed does (not a manual one, not a cancelled, missed or skipped)."""
    return not run.manual and run.status in (RunStatus.SUCCEEDED, RunStatus.FAILED)


@dataclass(frozen=True, slots=True)
class TaskCount:
    """The fields of a task that counting outcomes reads and writes."""

    enabled: bool
    consecutive_failures: int
    failing: bool
    pause_after_failures: int | None
    next_fire_at: datetime | None
    next_run_at: datetime | None
    updated_at: datetime
    version: int
    paused: bool = False  # whether counting paused the task

    @classmethod
    def of(cls, task: Task) -> TaskCount:
        return cls(
            enabled=task.enabled,
            consecutive_failures=task.consecutive_failures,
            failing=task.failing,
            pause_after_failures=task.pause_after_failures,
            next_fire_at=task.next_fire_at,
            next_run_at=task.next_run_at,
            updated_at=task.updated_at,
            version=task.version,
        )

    def task_fields(self) -> dict[str, Any]:
        """The fields to write on the task (all but `pause_after_failures`, read only)."""
        return {
            "enabled": self.enabled,
            "consecutive_failures": self.consecutive_failures,
            "failing": self.failing,
            "next_fire_at": self.next_fire_at,
            "next_run_at": self.next_run_at,
            "updated_at": self.updated_at,
            "version": self.version,
        }


def count_outcome(count: TaskCount, run: Run) -> TaskCount:
    """The task's count after the finished `run`: a success resets the consecutive
    failures, a failure adds one and, on an enabled task, reaching
    `pause_after_failures` pauses it (at the run's `finished_at`, a new version)."""
    if not counts(run):
        return count
    if run.status is RunStatus.SUCCEEDED:
        return replace(count, consecutive_failures=0, failing=False)
    failures = count.consecutive_failures + 1
    limit = count.pause_after_failures
    if not (count.enabled and limit is not None and failures >= limit):
        return replace(count, consecutive_failures=failures, failing=True)
    return replace(
        count,
        consecutive_failures=failures,
        failing=True,
        enabled=False,
        next_fire_at=None,
        next_run_at=None,
        updated_at=run.finished_at or count.updated_at,
        version=count.version + 1,
        paused=True,
    )


def count_outcomes(
    counts_before: Mapping[UUID, TaskCount], finished_runs: Iterable[Run]
) -> dict[UUID, TaskCount]:
    """Count a batch of finished runs, in the order of the batch, on their tasks.

    Args:
        counts_before: the count of each task a run of the batch may change; a run
            whose task is left out (deleted, or known to need no write) counts nothing.
        finished_runs: the runs the batch finished (those no longer running left out).

    Returns the new count of every task whose count changed.
    """
    after = dict(counts_before)
    for run in finished_runs:
        count = after.get(run.task_id)
        if count is not None:
            after[run.task_id] = count_outcome(count, run)
    return {task_id: count for task_id, count in after.items() if count != counts_before[task_id]}
