"""Starting runs in memory: claiming due tasks under the lock, and manual runs."""

from __future__ import annotations

import asyncio
from datetime import datetime
from uuid import UUID

from adapters.memory.slots import Occurrence
from adapters.memory.state import MemoryStoreBase, copy_task
from domain.claims import claim, claimed_task_fields
from domain.events import claim_events
from domain.manual_runs import manual_run
from domain.runs import ClaimedRun, Run, RunStatus, lease_expired


class RunStarts(MemoryStoreBase):
    """The claims and manual runs of `InMemoryTaskStore`."""

    async def claim_due(self, now: datetime, limit: int, replica: str) -> list[ClaimedRun]:
        claimed: list[ClaimedRun] = []
        # Yield as a database round trip would, so engines sharing the store interleave.
        await asyncio.sleep(0)
        async with self._lock:
            due = sorted(
                (
                    task
                    for task in self._tasks.values()
                    if task.enabled and task.next_run_at is not None and task.next_run_at <= now
                ),
                key=lambda task: (task.next_run_at, task.id),
            )
            for task in due:
                if len(claimed) >= limit:
                    break
                decision = claim(task, now, self._calendars)
                if decision is None:
                    self._tasks[task.id] = task.model_copy(
                        update=claimed_task_fields(task, None, None)
                    )
                    continue
                # catch_up "all": each earlier occurrence a run of its own, first.
                occurrences = [
                    *(
                        Occurrence(e.status, e.scheduled_for, e.coalesced, e.error)
                        for e in decision.earlier
                    ),
                    Occurrence(decision.status, decision.scheduled_for, decision.coalesced),
                ]
                runs = self._slots.claim(copy_task(task), now, replica, occurrences)
                update = claimed_task_fields(task, decision, runs[-1].run)
                self._tasks[task.id] = task.model_copy(update=update)
                claimed += runs
            # Events: with the claims they tell of, under the same lock.
            self.outbox.add(claim_events(self._rules, claimed))
            self.backfills.settle(self._slots.take_dropped())  # queued runs replaced
            replaced, self._slots.asked_to_stop = self._slots.asked_to_stop, False
        if replaced:  # the engines running the replaced runs stop them
            self.notifier.notify()
        return claimed

    async def start_manual_run(
        self, task_id: UUID, now: datetime, replica: str, busy: str | None = None
    ) -> ClaimedRun:
        async with self._lock:
            task = self._task(task_id)
            leases = self._active_leases(task_id, now)
            run = self._slots.record(manual_run(task, now, replica, leases, busy))
            manual = ClaimedRun(task=copy_task(task), run=run)
            self.outbox.add(claim_events(self._rules, [manual]))
            return manual

    async def renew_lease(self, run: Run, now: datetime, expires_at: datetime) -> Run | None:
        await asyncio.sleep(0)
        async with self._lock:
            stored = self._runs.get(run.id)
            lease = self._leases.get(run.id)
            if stored is None or lease is None or stored.status is not RunStatus.RUNNING:
                return None
            if lease_expired(stored, now):
                return None
            renewed = stored.model_copy(update={"lease_expires_at": expires_at})
            self._runs[run.id] = renewed
            lease.expires_at = expires_at
            return renewed
