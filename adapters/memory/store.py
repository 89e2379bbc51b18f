"""The TaskStore port in memory, with the semantics of the PostgreSQL store.

One `InMemoryTaskStore` is one database: several engines of one process may share it,
and an asyncio lock makes each claim atomic, as a PostgreSQL transaction with
`FOR UPDATE SKIP LOCKED` does. Every task goes in and comes out as a deep copy, so no
caller ever holds state the store holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from uuid import UUID

from adapters.memory.outbox import MemoryOutbox
from adapters.memory.slots import Lease, Occurrence, SlotBook
from adapters.memory.waker import InMemoryNotifier, InMemoryWaker
from application.ports import Freed, RunFilter, RunPageKey, TaskFilter, TaskPageKey, TaskUpdate
from domain.claims import claim, claimed_task_fields, new_run, resolve_status
from domain.errors import (
    DuplicateTaskName,
    RunNotFound,
    RunNotRunning,
    TaskNotFound,
    VersionConflict,
)
from domain.events import EventRules, TaskRef, claim_events, outcome_events
from domain.history import TaskVersion, auto_paused, changed, created, deleted
from domain.instants import truncate
from domain.outcomes import TaskCount, check_outcome, count_outcomes, finished
from domain.overlap import (
    CANCELLED_BY_DELETE,
    CANCELLED_BY_REQUEST,
    dropped_queue_error,
    keeps_queue,
)
from domain.runs import REPLICA_LOST, ClaimedRun, Run, RunOutcome, RunStatus
from domain.tasks import Task, TaskSpec

_WRITABLE = tuple(TaskSpec.model_fields)
_SCHEDULE = ("next_fire_at", "next_run_at", "consecutive_failures")


class InMemoryTaskStore:
    """A full `TaskStore` in one process. `notifier` is its wake-up channel; `outbox`
    its EventStore, written under the same lock as the causes of its events (`events`
    says which events a cause raises)."""

    def __init__(self, events: EventRules | None = None) -> None:
        self.notifier = InMemoryNotifier()
        self._lock = asyncio.Lock()
        self._rules = events or EventRules()
        self.outbox = MemoryOutbox(self._lock)
        self._tasks: dict[UUID, Task] = {}
        self._names: dict[str, UUID] = {}
        self._runs: dict[UUID, Run] = {}
        self._leases: dict[UUID, Lease] = {}  # by run id
        self._history: dict[UUID, list[TaskVersion]] = {}  # by task id, oldest first
        self._slots = SlotBook(self._runs, self._leases)

    def new_waker(self) -> InMemoryWaker:
        """A waker that every mutation of this store wakes."""
        return InMemoryWaker(self.notifier)

    # -- tasks ------------------------------------------------------------------

    async def create_task(self, task: Task, *, actor: str | None = None) -> Task:
        async with self._lock:
            stored = self._create(task, actor)
        self.notifier.notify()
        return _copy(stored)

    def _create(self, task: Task, actor: str | None) -> Task:
        if task.name in self._names:
            raise DuplicateTaskName(task.name)
        if task.id in self._tasks:
            raise ValueError(f"a task with id {task.id} already exists")
        stored = _copy(task.model_copy(update={"version": 1}))
        self._tasks[task.id] = stored
        self._names[task.name] = task.id
        self._history[task.id] = [created(stored, actor)]
        return stored

    async def get_task(self, task_id: UUID) -> Task:
        return _copy(self._task(task_id))

    async def get_task_by_name(self, name: str) -> Task:
        task_id = self._names.get(name)
        if task_id is None:
            raise TaskNotFound(name)
        return _copy(self._task(task_id))

    async def list_tasks(
        self, task_filter: TaskFilter, after: TaskPageKey | None, limit: int
    ) -> list[Task]:
        start = None if after is None else (after.created_at, after.id)
        found = sorted(
            (
                task
                for task in self._tasks.values()
                if _matches(task, task_filter)
                and (start is None or (task.created_at, task.id) > start)
            ),
            key=lambda task: (task.created_at, task.id),
        )
        return [_copy(task) for task in found[:limit]]

    async def update_task(
        self, task: Task, expected_version: int, *, reschedule: bool, actor: str | None = None
    ) -> Task:
        async with self._lock:
            updated = self._update(task, expected_version, reschedule, actor)
        self.notifier.notify()
        return _copy(updated)

    def _update(
        self, task: Task, expected_version: int, reschedule: bool, actor: str | None
    ) -> Task:
        stored = self._task(task.id)
        if stored.version != expected_version:
            raise VersionConflict(task.id, expected_version, stored.version)
        owner = self._names.get(task.name)
        if owner is not None and owner != task.id:
            raise DuplicateTaskName(task.name)
        fields = _WRITABLE + _SCHEDULE if reschedule else _WRITABLE
        update = {name: getattr(task, name) for name in fields}
        update |= {"version": stored.version + 1, "updated_at": task.updated_at}
        updated = _copy(stored.model_copy(update=update))
        del self._names[stored.name]
        self._names[updated.name] = updated.id
        self._tasks[updated.id] = updated
        self._history.setdefault(updated.id, []).append(changed(stored, updated, actor))
        if not keeps_queue(updated):
            self._slots.cancel_queue(updated.id, updated.updated_at, dropped_queue_error(updated))
        return updated

    async def delete_task(
        self, task_id: UUID, *, at: datetime | None = None, actor: str | None = None
    ) -> None:
        async with self._lock:
            self._delete(task_id, at, actor)
        self.notifier.notify()

    def _delete(self, task_id: UUID, at: datetime | None, actor: str | None) -> None:
        task = self._task(task_id)
        when = truncate(at or datetime.now(UTC))
        self._history.setdefault(task_id, []).append(deleted(task, when, actor))
        del self._tasks[task_id]
        del self._names[task.name]
        self._slots.cancel_queue(task_id, when, CANCELLED_BY_DELETE)
        for run_id in [r for r, lease in self._leases.items() if lease.task_id == task_id]:
            del self._leases[run_id]

    async def apply_tasks(
        self,
        created: Sequence[Task],
        updated: Sequence[TaskUpdate],
        deleted: Sequence[UUID],
        *,
        at: datetime,
        actor: str | None = None,
    ) -> None:
        async with self._lock:
            # Every check first, so that a failing one leaves everything as it was.
            names = dict(self._names)
            for task_id in deleted:
                del names[self._task(task_id).name]
            for update in updated:
                stored = self._task(update.task.id)
                if stored.version != update.expected_version:
                    raise VersionConflict(stored.id, update.expected_version, stored.version)
                del names[stored.name]
            for task in [*created, *(update.task for update in updated)]:
                if task.name in names:
                    raise DuplicateTaskName(task.name)
                names[task.name] = task.id
            for task_id in deleted:
                self._delete(task_id, at, actor)
            for update in updated:
                self._update(update.task, update.expected_version, update.reschedule, actor)
            for task in created:
                self._create(task, actor)
        self.notifier.notify()

    async def task_history(
        self, task_id: UUID, before_version: int | None, limit: int
    ) -> list[TaskVersion]:
        versions = reversed(self._history.get(task_id, []))
        found = [v for v in versions if before_version is None or v.version < before_version]
        return found[:limit]

    async def task_version_at(self, task_id: UUID, at: datetime) -> TaskVersion | None:
        made = [v for v in self._history.get(task_id, []) if v.at <= at]
        return made[-1] if made else None

    async def delete_history_before(self, cutoff: datetime, batch: int) -> int:
        async with self._lock:
            old = sorted(
                (
                    (version.at, task_id, version.version)
                    for task_id, versions in self._history.items()
                    for i, version in enumerate(versions)
                    if version.at < cutoff
                    and (
                        version.state is None
                        or any(later.at <= cutoff for later in versions[i + 1 :])
                    )
                ),
            )[:batch]
            for _, task_id, number in old:
                kept = [v for v in self._history[task_id] if v.version != number]
                if kept:
                    self._history[task_id] = kept
                else:
                    del self._history[task_id]
        return len(old)

    async def next_due_at(self) -> datetime | None:
        due = [t.next_run_at for t in self._tasks.values() if t.enabled and t.next_run_at]
        return min(due, default=None)

    # -- claims and runs --------------------------------------------------------

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
                decision = claim(task, now)
                if decision is None:
                    self._tasks[task.id] = task.model_copy(
                        update=claimed_task_fields(task, None, None)
                    )
                    continue
                # catch_up "all": each earlier occurrence a run of its own, first.
                occurrences = [
                    *(Occurrence(e.status, e.scheduled_for, e.coalesced) for e in decision.earlier),
                    Occurrence(decision.status, decision.scheduled_for, decision.coalesced),
                ]
                runs = self._slots.claim(_copy(task), now, replica, occurrences)
                update = claimed_task_fields(task, decision, runs[-1].run)
                self._tasks[task.id] = task.model_copy(update=update)
                claimed += runs
            # Events: with the claims they tell of, under the same lock.
            self.outbox.add(claim_events(self._rules, claimed))
            replaced, self._slots.asked_to_stop = self._slots.asked_to_stop, False
        if replaced:  # the engines running the replaced runs stop them
            self.notifier.notify()
        return claimed

    async def start_manual_run(self, task_id: UUID, now: datetime, replica: str) -> ClaimedRun:
        async with self._lock:
            task = self._task(task_id)
            status = resolve_status(
                RunStatus.RUNNING, self._active_leases(task_id, now), task.max_running_instances
            )
            run = self._record_run(task, now, replica, status, truncate(now), 1, manual=True)
            manual = ClaimedRun(task=_copy(task), run=run)
            self.outbox.add(claim_events(self._rules, [manual]))
            return manual

    async def finish_run(self, run_id: UUID, outcome: RunOutcome) -> Run:
        runs = await self.finish_runs([(run_id, outcome)])
        if not runs:
            raise RunNotFound(run_id)
        return runs[0]

    async def finish_runs(self, outcomes: Sequence[tuple[UUID, RunOutcome]]) -> list[Run]:
        return (await self._finish_runs(outcomes, None)).runs

    async def finish_runs_starting(
        self, outcomes: Sequence[tuple[UUID, RunOutcome]], now: datetime, replica: str
    ) -> Freed:
        return await self._finish_runs(outcomes, (now, replica))

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
        tasks = [_copy(task) for t in task_ids if (task := self._tasks.get(t)) is not None]
        return self._slots.refill(tasks, *starting)

    async def get_run(self, run_id: UUID) -> Run:
        return self._run(run_id)

    async def recent_runs(self, task_ids: Sequence[UUID], limit: int) -> dict[UUID, list[Run]]:
        wanted = set(task_ids)
        recent: dict[UUID, list[Run]] = {task_id: [] for task_id in task_ids}
        for run in sorted(
            (run for run in self._runs.values() if run.task_id in wanted),
            key=lambda run: (run.scheduled_for, run.id),
            reverse=True,
        ):
            if len(recent[run.task_id]) < limit:
                recent[run.task_id].append(run)
        return recent

    async def list_runs(
        self, task_id: UUID, status: RunStatus | None, after: RunPageKey | None, limit: int
    ) -> list[Run]:
        start = None if after is None else (after.scheduled_for, after.id)
        found = sorted(
            (
                run
                for run in self._runs.values()
                if run.task_id == task_id
                and (status is None or run.status is status)
                and (start is None or (run.scheduled_for, run.id) < start)
            ),
            key=lambda run: (run.scheduled_for, run.id),
            reverse=True,
        )
        return found[:limit]

    async def list_all_runs(
        self, run_filter: RunFilter, after: RunPageKey | None, limit: int
    ) -> list[Run]:
        tagged = None
        if run_filter.tag is not None:
            tagged = {t.id for t in self._tasks.values() if run_filter.tag in t.tags}
        start = None if after is None else (after.scheduled_for, after.id)
        found = sorted(
            (
                run
                for run in self._runs.values()
                if _run_matches(run, run_filter)
                and (tagged is None or run.task_id in tagged)
                and (start is None or (run.scheduled_for, run.id) < start)
            ),
            key=lambda run: (run.scheduled_for, run.id),
            reverse=True,
        )
        return found[:limit]

    async def request_cancel(self, run_id: UUID) -> Run:
        async with self._lock:
            run = self._run(run_id)
            if run.status is RunStatus.QUEUED:
                return self._slots.cancel_queued(run_id, datetime.now(UTC), CANCELLED_BY_REQUEST)
            if run.status is not RunStatus.RUNNING:
                raise RunNotRunning(run_id, run.status.value)
            lease = self._leases.get(run_id)
            if lease is not None:
                lease.cancel_requested = True
        self.notifier.notify()
        return run

    async def cancel_requested(self, run_ids: Collection[UUID]) -> set[UUID]:
        leases = self._leases
        return {
            run_id
            for run_id in run_ids
            if (lease := leases.get(run_id)) is not None and lease.cancel_requested
        }

    async def cancel_reasons(self, run_ids: Collection[UUID]) -> dict[UUID, str | None]:
        leases = self._leases
        return {
            run_id: lease.cancel_reason
            for run_id in run_ids
            if (lease := leases.get(run_id)) is not None and lease.cancel_requested
        }

    async def expire_lost_runs(self, now: datetime) -> list[Run]:
        return (await self._expire_lost_runs(now, None)).runs

    async def expire_lost_runs_starting(self, now: datetime, replica: str) -> Freed:
        return await self._expire_lost_runs(now, (now, replica))

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
        return Freed(lost, started)

    async def delete_runs_before(self, cutoff: datetime, batch: int) -> int:
        async with self._lock:
            old = sorted(
                (r for r in self._runs.values() if r.status.finished and r.scheduled_for < cutoff),
                key=lambda run: (run.scheduled_for, run.id),
            )[:batch]
            for run in old:
                del self._runs[run.id]
        return len(old)

    async def ping(self) -> None:
        return None

    # -- internals (callers hold the lock where they write) -------------------------

    def _task(self, task_id: UUID) -> Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise TaskNotFound(task_id)
        return task

    def _run(self, run_id: UUID) -> Run:
        run = self._runs.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        return run

    def _refs(self, runs: Sequence[Run]) -> dict[UUID, TaskRef]:
        """What the event rules read of the tasks of `runs` (a deleted one left out)."""
        return {
            run.task_id: TaskRef.of(task)
            for run in runs
            if (task := self._tasks.get(run.task_id)) is not None
        }

    def _active_leases(self, task_id: UUID, now: datetime) -> int:
        return sum(
            1
            for lease in self._leases.values()
            if lease.task_id == task_id and lease.expires_at > now
        )

    def _record_run(
        self,
        task: Task,
        now: datetime,
        replica: str,
        status: RunStatus,
        scheduled_for: datetime,
        coalesced: int,
        *,
        manual: bool = False,
    ) -> Run:
        run = new_run(task, now, replica, status, scheduled_for, coalesced, manual=manual)
        return self._slots.record(run)

    def _finish(self, run: Run, outcome: RunOutcome) -> Run:
        ended = finished(run, outcome)
        self._runs[run.id] = ended
        self._leases.pop(run.id, None)
        return ended


def _copy(task: Task) -> Task:
    return task.model_copy(deep=True)


def _matches(task: Task, task_filter: TaskFilter) -> bool:
    if task_filter.enabled is not None and task.enabled is not task_filter.enabled:
        return False
    if task_filter.tag is not None and task_filter.tag not in task.tags:
        return False
    prefix = task_filter.name_prefix
    return prefix is None or task.name.startswith(prefix)


def _run_matches(run: Run, run_filter: RunFilter) -> bool:
    return (
        (run_filter.status is None or run.status is run_filter.status)
        and (run_filter.task_id is None or run.task_id == run_filter.task_id)
        and (run_filter.since is None or run.scheduled_for >= run_filter.since)
        and (run_filter.until is None or run.scheduled_for <= run_filter.until)
        and (run_filter.backfill_id is None or run.backfill_id == run_filter.backfill_id)
    )
