"""A manual run (fire now): called at once when the task has a free slot and the
replica it was fired on has room for one more call; otherwise recorded SKIPPED, not
called, with the reason (docs/api.md, `POST /tasks/{id}/runs`)."""

from __future__ import annotations

from datetime import datetime

from domain.claims import new_run, resolve_status
from domain.instants import truncate
from domain.runs import Run, RunStatus
from domain.tasks import Task

# The error of a manual run fired on a replica whose every call slot was taken: waiting
# for one would hold the task's slot (its lease) meanwhile, and could outlast the lease.
REPLICA_BUSY = (
    "fired on a replica already making its max_concurrent_runs = {limit} calls; not called"
)


def manual_run(
    task: Task, now: datetime, replica: str, active_leases: int, busy: str | None = None
) -> Run:
    """The run a manual fire records at `now`: RUNNING with a lease, or SKIPPED when the
    task has `max_running_instances` runs in flight or (`busy`, the reason) the replica
    cannot start another call."""
    status = resolve_status(RunStatus.RUNNING, active_leases, task.max_running_instances)
    if status is RunStatus.RUNNING and busy:
        skipped = new_run(task, now, replica, RunStatus.SKIPPED, truncate(now), 1, manual=True)
        return skipped.model_copy(update={"error": busy})
    return new_run(task, now, replica, status, truncate(now), 1, manual=True)
