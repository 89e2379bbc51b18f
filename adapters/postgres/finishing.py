"""Recording a batch of outcomes: the arrays `finish_runs` unnests, and the counts the
batch leaves on its tasks.

The rule is the domain's (`domain.outcomes`): `finished_fields` sets a finished run's
fields, `count_outcomes` counts the batch on its tasks in the order of the batch. This
module only turns the rows `lock_counted_tasks` locked into the domain's counts and the
counts it decided into the arrays `count_outcomes` writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any
from uuid import UUID

from domain.outcomes import TaskCount, check_outcome, count_outcomes, finished_fields
from domain.runs import Run, RunOutcome

# The fields of a finished run, in the order `finish_runs` unnests them. A started_at
# of None leaves the run's own (finished_fields leaves it out).
_FINISHED = ("status", "attempts", "http_status", "response_excerpt", "error", "finished_at")


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
            check_outcome(outcome)
            first.setdefault(run_id, outcome)
        return cls(first)

    def __bool__(self) -> bool:
        return bool(self.outcomes)

    @property
    def run_ids(self) -> list[UUID]:
        return list(self.outcomes)

    def params(self) -> dict[str, Any]:
        """The parameters of `finish_runs` (and, a subset, of `lock_counted_tasks`)."""
        ended = [finished_fields(outcome) for outcome in self.outcomes.values()]
        params: dict[str, Any] = {"run_ids": self.run_ids}
        for name in _FINISHED:
            params[name] = [f[name] for f in ended]
        params["status"] = [status.value for status in params["status"]]
        params["started_at"] = [f.get("started_at") for f in ended]
        return params


# The columns `lock_counted_tasks` returns after the id (and before `queueing`): what a
# TaskCount is read from.
COUNT_COLUMNS = tuple(f.name for f in fields(TaskCount) if f.name != "paused")


def counted_tasks(
    locked: Iterable[dict[str, Any]], finished: Iterable[Run]
) -> dict[str, Any] | None:
    """The parameters of `count_outcomes` for the tasks whose count changed, or None.

    Args:
        locked: the rows `lock_counted_tasks` locked (an id and COUNT_COLUMNS); a task
            left out needs no write.
        finished: the runs this batch finished, in the order of the batch.
    """
    before = {row["id"]: TaskCount(**{name: row[name] for name in COUNT_COLUMNS}) for row in locked}
    changed = count_outcomes(before, finished)
    if not changed:
        return None
    written = [count.task_fields() for count in changed.values()]
    params: dict[str, Any] = {"task_ids": list(changed)}
    for name in written[0]:
        params[name] = [f[name] for f in written]
    params["paused"] = [count.paused for count in changed.values()]
    return params
