"""Turning locked task rows into runs and leases, a batch at a time.

The decisions are the domain's (`claim`, `resolve_status`, `new_run`,
`claimed_task_fields`); this module only gathers what they decided into the arrays that
`record_claims` unnests, so that a batch of any size is written by one statement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from domain.runs import Run

# The run fields `record_claims` and `record_manual_run` write, all of a new run's.
_RUN_FIELDS = (
    "id",
    "task_id",
    "scheduled_for",
    "coalesced",
    "claimed_at",
    "started_at",
    "finished_at",
    "lease_expires_at",
    "error",
    "manual",
    "attempts",
    "replica",
)
# Where a run field's array is named apart from the task's of the same name.
_BATCH_NAMES = {"id": "run_ids", "task_id": "run_task_ids"}
_TASK_FIELDS = ("next_fire_at", "next_run_at", "last_run_at", "claimed_through")


@dataclass(slots=True)
class ClaimBatch:
    """The columns of one `record_claims` statement: a row per task, a row per run."""

    task_ids: list[UUID] = field(default_factory=list)
    task_fields: list[dict[str, Any]] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)

    def add(self, task_id: UUID, fields: dict[str, Any], run: Run | None = None) -> None:
        """Write `fields` (`claimed_task_fields`) on the task and record `run` (made by
        `new_run`) when there is one."""
        self.task_ids.append(task_id)
        self.task_fields.append(fields)
        if run is not None:
            self.runs.append(run)

    def add_run(self, run: Run) -> None:
        """Record one more run of a task `add` names (catch_up "all" makes several)."""
        self.runs.append(run)

    def __bool__(self) -> bool:
        return bool(self.task_ids)

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"task_ids": self.task_ids}
        for name in _TASK_FIELDS:
            params[name] = [fields[name] for fields in self.task_fields]
        for name in _RUN_FIELDS:
            params[_BATCH_NAMES.get(name, name)] = [getattr(run, name) for run in self.runs]
        params["status"] = [run.status.value for run in self.runs]
        return params


def manual_run_params(run: Run) -> dict[str, Any]:
    """The parameters of `record_manual_run`."""
    params = {name: getattr(run, name) for name in _RUN_FIELDS}
    params["status"] = run.status.value
    return params
