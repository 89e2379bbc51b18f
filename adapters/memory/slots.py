"""The in-memory store's runs seen by task slot: leases, queued runs, and carrying out
the slot plans of `domain.overlap`.

The store holds its lock around every call; this module only keeps the books (a
queue per task, oldest first, so that no claim reads a whole queue) and writes what
the domain decided.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from domain.claims import new_run
from domain.overlap import (
    Placement,
    QueueDrop,
    Slots,
    cancelled_fields,
    claim_reads_queue,
    dropped_queue,
    plan,
    queue_count_bound,
    replaced_by,
    start_fields,
)
from domain.runs import ClaimedRun, Run, RunStatus
from domain.tasks import Task


@dataclass(slots=True)
class Lease:
    task_id: UUID
    expires_at: datetime
    cancel_requested: bool = False
    cancel_reason: str | None = None


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One run a claim decided (`domain.claims`), before its slot is placed."""

    status: RunStatus
    scheduled_for: datetime
    coalesced: int
    error: str | None = None  # a MISSED run's reason (domain.claims.EarlierRun)


class SlotBook:
    """Runs, leases and queues of one in-memory store (its dicts, shared)."""

    def __init__(self, runs: dict[UUID, Run], leases: dict[UUID, Lease]) -> None:
        self._runs = runs
        self._leases = leases
        self._queues: dict[UUID, list[tuple[datetime, UUID]]] = {}  # by task, oldest first
        self.asked_to_stop = False  # since the store last looked: it wakes the engines
        # Queued runs a claim or a refill cancelled, since the store last looked: each
        # may have been its backfill's last (`take_dropped`).
        self._dropped: list[Run] = []

    # -- reading ----------------------------------------------------------------------

    def in_flight(self, task_id: UUID, now: datetime) -> list[UUID]:
        """The task's runs holding an unexpired lease, oldest started first."""
        held = [r for r, lease in self._leases.items() if _holds(lease, task_id, now)]
        return sorted(held, key=lambda r: (self._runs[r].started_at or self._runs[r].claimed_at, r))

    def slots(self, task: Task, now: datetime, bound: int | None = None) -> Slots:
        """The task's slots, its queue counted up to `bound` (by default
        `domain.overlap.queue_count_bound`)."""
        held = self.in_flight(task.id, now)
        queued = len(self._queues.get(task.id, ()))
        return Slots(
            limit=task.max_running_instances,
            in_flight=len(held),
            queued=min(queued, queue_count_bound(task) if bound is None else bound),
            replaceable=sum(1 for r in held if not self._leases[r].cancel_requested),
        )

    def has_queue(self, task_id: UUID) -> bool:
        return bool(self._queues.get(task_id))

    # -- writing ----------------------------------------------------------------------

    def record(self, run: Run) -> Run:
        self._runs[run.id] = run
        if run.lease_expires_at is not None:
            self._leases[run.id] = Lease(run.task_id, run.lease_expires_at)
        if run.status is RunStatus.QUEUED:
            bisect.insort(self._queues.setdefault(run.task_id, []), (run.scheduled_for, run.id))
        return run

    def free(self, run_id: UUID) -> None:
        self._leases.pop(run_id, None)

    def cancel_queued(self, run_id: UUID, now: datetime, error: str) -> Run:
        run = self._runs[run_id]
        self._unqueue(run)
        cancelled = run.model_copy(update=cancelled_fields(now, error))
        self._runs[run_id] = cancelled
        return cancelled

    def cancel_queue(self, task_id: UUID, now: datetime, drop: QueueDrop) -> list[Run]:
        """Cancel the queued runs of the task `drop` names (`domain.overlap.dropped_queue`)."""
        return [
            self.cancel_queued(r, now, drop.error)
            for _, r in list(self._queues.get(task_id, []))
            if drop.backfilled or self._runs[r].backfill_id is None
        ]

    def claim(
        self, task: Task, now: datetime, replica: str, occurrences: Iterable[Occurrence]
    ) -> list[ClaimedRun]:
        """Carry out the slot plan of one claim: the queued runs started, then the runs
        of `occurrences` as placed, in that order."""
        made = list(occurrences)
        slots = self.slots(task, now)
        if not claim_reads_queue(task):  # its own occurrences: by the leases alone
            slots = Slots(slots.limit, slots.in_flight, 0, slots.replaceable)
        slot_plan = plan(task.overlap, slots, [o.status for o in made])
        claimed = self.start(task, now, replica, slot_plan.start_queued)
        stoppable = deque(r for r in self.in_flight(task.id, now) if self._stoppable(r))
        waiting = deque(r for _, r in self._queues.get(task.id, []))
        made_ids: list[UUID] = []
        for occurrence, placement in zip(made, slot_plan.placements, strict=True):
            status = occurrence.status if placement is None else placement.status
            when, coalesced = occurrence.scheduled_for, occurrence.coalesced
            run = self.record(
                new_run(task, now, replica, status, when, coalesced, error=occurrence.error)
            )
            if placement is Placement.REPLACE_RUNNING:
                self._ask_to_stop(stoppable.popleft(), replaced_by(run.id))
            elif placement is Placement.REPLACE_QUEUED:
                self._dropped.append(
                    self.cancel_queued(waiting.popleft(), now, replaced_by(run.id))
                )
            if placement is Placement.START:
                stoppable.append(run.id)
            elif run.status is RunStatus.QUEUED:
                waiting.append(run.id)
            made_ids.append(run.id)
        # As they stand now: a later occurrence may have replaced one of them.
        return claimed + [ClaimedRun(task=task, run=self._runs[i]) for i in made_ids]

    def start(self, task: Task, now: datetime, replica: str, count: int) -> list[ClaimedRun]:
        """Start the task's `count` oldest queued runs on `replica`."""
        started = []
        for _, run_id in list(self._queues.get(task.id, []))[:count]:
            run = self._runs[run_id]
            self._unqueue(run)
            run = self.record(run.model_copy(update=start_fields(task, now, replica)))
            started.append(ClaimedRun(task=task, run=run))
        return started

    def refill(self, tasks: Iterable[Task], now: datetime, replica: str) -> list[ClaimedRun]:
        """Start queued runs in the slots freed on `tasks` (those with a queue); a task
        that may no longer keep one (`domain.overlap.dropped_queue`: paused meanwhile)
        has it cancelled instead."""
        started: list[ClaimedRun] = []
        for task in tasks:
            if not self.has_queue(task.id):
                continue
            drop = dropped_queue(task)
            if drop is not None:
                self._dropped += self.cancel_queue(task.id, now, drop)
                if drop.backfilled:
                    continue
            slots = self.slots(task, now)
            started += self.start(task, now, replica, plan(task.overlap, slots, []).start_queued)
        return started

    def take_dropped(self) -> list[Run]:
        """The queued runs claims and refills cancelled since the last call, for the
        store to finish the backfills they may have ended, under the same lock."""
        dropped, self._dropped = self._dropped, []
        return dropped

    # -- internals --------------------------------------------------------------------

    def _stoppable(self, run_id: UUID) -> bool:
        return not self._leases[run_id].cancel_requested

    def _ask_to_stop(self, run_id: UUID, reason: str) -> None:
        lease = self._leases[run_id]
        lease.cancel_requested = True
        lease.cancel_reason = reason
        self.asked_to_stop = True

    def _unqueue(self, run: Run) -> None:
        queue = self._queues.get(run.task_id, [])
        index = bisect.bisect_left(queue, (run.scheduled_for, run.id))
        if index < len(queue) and queue[index] == (run.scheduled_for, run.id):
            del queue[index]
        if not queue:
            self._queues.pop(run.task_id, None)


def _holds(lease: Lease, task_id: UUID, now: datetime) -> bool:
    return lease.task_id == task_id and lease.expires_at > now
