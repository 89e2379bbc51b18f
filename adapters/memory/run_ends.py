"""Ending runs in memory: recording outcomes in a batch, failing the runs whose lease
expired, and starting the queued runs either frees a slot for."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from uuid import UUID

from adapters.memory.state import MemoryStoreBase, copy_task
from adapters.run_ends import RunEndsBase
from application.ports import Freed
from domain.events import outcome_events
from domain.history import auto_paused
from domain.instants import truncate
from domain.outcomes import TaskCount, check_outcome, count_outcomes
from domain.overlap import PAUSED
from domain.runs import REPLICA_LOST, ClaimedRun, Run, RunOutcome, RunStatus


class RunEnds(MemoryStoreBase, RunEndsBase):
    """The outcomes and lost-lease sweep of `InMemoryTaskStore`."""

    async def _finish_runs(
        self, outcomes: Sequence[tuple[UUID, RunOutcome]], starting: tuple[datetime, str] | None
    ) -> Freed:
        for _, outcome in outcomes:
            check_outcome(outcome)
        recorded: list[Run] = []
        ended: list[Run] = []
        async with self._lock:
            for run_id, outcome in outcomes:
                run = self._runs.get(run_id)
                if run is None:
                    continue
                if run.status is RunStatus.RUNNING:
                    run = self._finish(run, outcome)
                    ended.append(run)
                recorded.append(run)
            before = {
                run.task_id: TaskCount.of(task)
                for run in ended
                if (task := self._tasks.get(run.task_id)) is not None
            }
            counted = count_outcomes(before, ended)
            for task_id, count in counted.items():
                task = self._tasks[task_id]
                self._tasks[task_id] = task = task.model_copy(update=count.task_fields())
                if count.paused:
                    self._history.setdefault(task_id, []).append(auto_paused(task))
            self.outbox.add(outcome_events(self._rules, self._refs(ended), before, ended))
            started = self._refill({run.task_id for run in ended}, starting)
            if starting is None:  # no refill cancels a paused task's queue: its pause does
                for task_id, count in counted.items():
                    if count.paused:
                        self.backfills.settle(
                            self._slots.cancel_queue(task_id, count.updated_at, PAUSED)
                        )
            self.backfills.settle([*ended, *self._slots.take_dropped()])
        if any(count.paused for count in counted.values()):
            self.notifier.notify()
        return Freed(recorded, started)

    def _refill(
        self, task_ids: Collection[UUID], starting: tuple[datetime, str] | None
    ) -> list[ClaimedRun]:
        """Start queued runs in the slots freed on these tasks, when a replica will call
        them (`starting`: when, and on which)."""
        if starting is None:
            return []
        tasks = [copy_task(task) for t in task_ids if (task := self._tasks.get(t)) is not None]
        return self._slots.refill(tasks, *starting)

    async def _expire_lost_runs(
        self, now: datetime, starting: tuple[datetime, str] | None
    ) -> Freed:
        lost: list[Run] = []
        async with self._lock:
            for run in list(self._runs.values()):
                expires = run.lease_expires_at
                if run.status is RunStatus.RUNNING and expires is not None and expires < now:
                    failed = run.model_copy(
                        update={
                            "status": RunStatus.FAILED,
                            "error": REPLICA_LOST,
                            "finished_at": truncate(now),
                        }
                    )
                    self._runs[run.id] = failed
                    self._leases.pop(run.id, None)
                    lost.append(failed)
            self.outbox.add(outcome_events(self._rules, self._refs(lost), {}, lost))
            started = self._refill({run.task_id for run in lost}, starting)
            self.backfills.settle([*lost, *self._slots.take_dropped()])
        return Freed(lost, started)
