"""The in-memory store's backfills (docs/policies.md, "Backfill"): every run of one
backfill written under one hold of the store's lock, placed as `domain.backfills`
decided, and a backfill's cancel."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from uuid import UUID

from adapters.memory.outbox import MemoryOutbox
from adapters.memory.slots import Lease, SlotBook
from adapters.memory.state import copy_task
from domain.backfills import (
    BACKFILL_QUEUE_BOUND,
    CANCELLED_BY_BACKFILL,
    STOPPED_BY_BACKFILL,
    Backfill,
    BackfillOverlap,
    BackfillRecord,
    BackfillState,
    backfill_plan,
    backfill_run,
    finished_event,
    missing,
    new_record,
    settled,
    settled_at,
)
from domain.errors import BackfillNotFound
from domain.events import EventRules, TaskRef
from domain.runs import ClaimedRun, Run, RunStatus
from domain.tasks import Task


class MemoryBackfills:
    """Backfills over one in-memory store's dicts (shared with it, under its lock)."""

    def __init__(
        self,
        lock: asyncio.Lock,
        task: Callable[[UUID], Task],
        runs: dict[UUID, Run],
        leases: dict[UUID, Lease],
        slots: SlotBook,
        notify: Callable[[], None],
        tasks: dict[UUID, Task],
        rules: EventRules,
        outbox: MemoryOutbox,
    ) -> None:
        self._lock = lock
        self._task = task
        self._runs = runs
        self._leases = leases
        self._slots = slots
        self._notify = notify
        self._records: dict[UUID, BackfillRecord] = {}
        self._tasks = tasks  # the store's, for the events' task refs
        self._rules = rules
        self._outbox = outbox

    async def backfill(
        self,
        task_id: UUID,
        backfill_id: UUID,
        occurrences: Sequence[datetime],
        overlap: BackfillOverlap,
        only_missing: bool,
        now: datetime,
        replica: str,
        dry_run: bool,
        *,
        span: tuple[datetime, datetime] | None = None,
        actor: str | None = None,
    ) -> Backfill:
        async with self._lock:
            task = copy_task(self._task(task_id))  # the caller never holds the store's own
            kept = list(occurrences)
            if only_missing:
                kept = missing(kept, self._succeeded(task_id))
            slots = self._slots.slots(task, now, BACKFILL_QUEUE_BOUND)
            slot_plan = backfill_plan(overlap, slots, len(kept))
            runs = [
                backfill_run(task, now, replica, placement, at, backfill_id)
                for at, placement in zip(kept, slot_plan.placements, strict=True)
            ]
            if dry_run:
                made = [ClaimedRun(task=task, run=run) for run in runs]
                return Backfill(backfill_id, kept, made, [])
            started = self._slots.start(task, now, replica, slot_plan.start_queued)
            made = [ClaimedRun(task=task, run=self._slots.record(run)) for run in runs]
            done = Backfill(backfill_id, kept, made, started)
            record = new_record(task, done, span, overlap, only_missing, now, actor)
            self._records[backfill_id] = record
            if record.status == "finished":  # nothing of it waits: finished at once
                self._raise_finished(BackfillState(record, self._counts(backfill_id)), now)
        self._notify()
        return done

    async def get_backfill(self, backfill_id: UUID) -> BackfillState:
        async with self._lock:
            record = self._records.get(backfill_id)
            if record is None:
                raise BackfillNotFound(backfill_id)
            return BackfillState(record, self._counts(backfill_id))

    async def cancel_backfill(self, backfill_id: UUID, now: datetime) -> int:
        async with self._lock:
            record = self._records.get(backfill_id)
            if record is None:
                raise BackfillNotFound(backfill_id)
            runs = [r for r in self._runs.values() if r.backfill_id == backfill_id]
            active = BackfillState(record, Counter(r.status for r in runs)).status == "active"
            cancelled = 0
            for run in runs:
                if run.status is RunStatus.QUEUED:
                    self._slots.cancel_queued(run.id, now, CANCELLED_BY_BACKFILL)
                    cancelled += 1
                elif run.status is RunStatus.RUNNING and (lease := self._leases.get(run.id)):
                    lease.cancel_requested = True
                    lease.cancel_reason = STOPPED_BY_BACKFILL
                    cancelled += 1
            if active:
                record = dataclasses.replace(record, status="cancelled", finished_at=now)
                self._records[backfill_id] = record
                self._raise_finished(BackfillState(record, self._counts(backfill_id)), now)
        self._notify()
        return cancelled

    def settle(self, ended: Iterable[Run]) -> None:
        """Finish the backfills of the `ended` runs none of whose runs waits or runs any
        more (`domain.backfills.settled`, at `domain.backfills.settled_at`), each raising
        `backfill.finished`. The caller holds the store's lock and has just ended them."""
        for backfill_id, now in settled_at(ended).items():
            record = self._records.get(backfill_id)
            if record is None:
                continue
            counts = self._counts(backfill_id)
            done = settled(BackfillState(record, counts), now)
            if done is not None:
                self._records[backfill_id] = done
                self._raise_finished(BackfillState(done, counts), now)

    def _counts(self, backfill_id: UUID) -> Counter[RunStatus]:
        return Counter(r.status for r in self._runs.values() if r.backfill_id == backfill_id)

    def _raise_finished(self, state: BackfillState, now: datetime) -> None:
        task = self._tasks.get(state.record.task_id)
        ref = None if task is None else TaskRef.of(task)
        self._outbox.add(finished_event(self._rules, ref, state, now))

    def _succeeded(self, task_id: UUID) -> set[datetime]:
        return {
            run.scheduled_for
            for run in self._runs.values()
            if run.task_id == task_id and run.status is RunStatus.SUCCEEDED and not run.manual
        }
