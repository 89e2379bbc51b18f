"""Declarative sync, for deploy pipelines that keep tasks in files: `PUT /tasks/{name}`
(create or replace one task whole) and `POST /tasks/apply` (make the stored tasks match a
list, all or nothing, in one transaction).

A task whose stored writable fields already equal what is asked is left alone and keeps
its version. What the scheduler filled in when it stored a trigger (the anchor of an
interval without `start_at`, the `start_date` of a calendar without one) is carried over
from the stored task when the rest of the trigger is equal (`domain.kept_schedule`), so
re-applying the same file never re-anchors a schedule.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from itertools import count
from typing import TYPE_CHECKING
from uuid import UUID

from pydantic import JsonValue

from application.calendars import CalendarReader, SchedulerStore, stored_calendars
from application.contention import before_retry
from application.ports import (
    Clock,
    Executor,
    HoldScope,
    TaskDelete,
    TaskKept,
    TaskUpdate,
)
from domain.errors import (
    DuplicateTaskName,
    InvalidRequest,
    ScheduleMoved,
    TaskNotFound,
    TransactionCollided,
    VersionConflict,
)
from domain.history import changes_between, state_of
from domain.instants import truncate
from domain.kept_schedule import carried
from domain.preconditions import PutConditions
from domain.schedule import Calendars
from domain.tasks import Task, TaskSpec
from domain.validation import FieldError

if TYPE_CHECKING:
    from application.scheduling import SchedulingService

# Attempts an apply makes reading, deciding and writing without holding its tasks; past
# them it holds them (`TaskStore.hold_tasks`), so that a steady stream of other writers
# cannot make it lose every time (docs/api.md, "POST /tasks/apply"). A prune that
# writes holds them from its first attempt (see `apply`).
UNHELD_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class ApplyResult:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    # Each updated task's changed fields, (old, new), as its history version records
    # them: what a dry run shows a reviewer before the deploy.
    changes: dict[str, dict[str, tuple[JsonValue, JsonValue]]] = field(default_factory=dict)


class TaskSync:
    """The sync use cases, on the same store, executor and clock as `SchedulingService`
    (whose rules for a new task and for a change they reuse)."""

    def __init__(
        self, store: SchedulerStore, executor: Executor, clock: Clock, service: SchedulingService
    ) -> None:
        self._store = store
        self._executor = executor
        self._clock = clock
        self._service = service

    async def put_task(
        self,
        spec: TaskSpec,
        conditions: PutConditions = PutConditions(),
        *,
        actor: str | None = None,
    ) -> tuple[Task, bool]:
        """Create the task `spec.name` names, or replace its writable fields with `spec`
        (fields left out already took their defaults). Returns the task and whether it
        was created. Raises VersionConflict when an `If-Match` of `conditions` does not
        hold (the task is at another version, or does not exist), PreconditionNotMet
        when `If-None-Match: *` does not (the task exists), InvalidRequest."""
        if_match = conditions.version
        self._executor.check(spec.target, spec.notify)
        for attempt in count():
            now = truncate(self._clock.now())
            try:
                current = await self._store.get_task_by_name(spec.name)
            except TaskNotFound:
                current = None
            replaced = None if current is None else current.trigger
            calendars = await self._service.calendars_for(spec.trigger, replaced)
            conditions.check("task", spec.name, stored=current is not None)
            if current is None:
                try:
                    task = self._service.new_task(spec, now, calendars)
                    return await self._store.create_task(task, actor=actor), True
                except DuplicateTaskName:
                    # Created meanwhile: replace it instead.
                    await before_retry(attempt, f"task {spec.name!r}")
                    continue
            if if_match is not None and current.version != if_match:
                raise VersionConflict(spec.name, if_match, current.version)
            update = self._replacement(current, spec, calendars)
            if update is None:
                return current, False
            try:
                return await self._write(update, actor), False
            except ScheduleMoved:
                pass  # claimed meanwhile, still at its version: read it again, plan anew
            except (VersionConflict, TaskNotFound):
                if if_match is not None:
                    raise VersionConflict(
                        spec.name, if_match, detail=f"task {spec.name!r} changed meanwhile"
                    ) from None
            await before_retry(attempt, f"task {spec.name!r}")
        raise AssertionError("unreachable")  # count() never ends; before_retry raises

    async def replace_task(
        self, task_id: UUID, spec: TaskSpec, version: int, *, actor: str | None = None
    ) -> Task:
        """Replace the writable fields of the task `task_id` with `spec` (fields left out
        already took their defaults), its name too: a new name renames it. Only while it
        is at `version`: the console's editor saves the form it showed this way. Raises
        TaskNotFound, VersionConflict, DuplicateTaskName (the name is another task's),
        InvalidRequest. An equal definition leaves the task and its version alone."""
        self._executor.check(spec.target, spec.notify)
        for attempt in count():
            current = await self._store.get_task(task_id)
            if current.version != version:
                raise VersionConflict(current.name, version, current.version)
            calendars = await self._service.calendars_for(spec.trigger, current.trigger)
            update = self._replacement(current, spec, calendars)
            if update is None:
                return current
            try:
                return await self._write(update, actor)
            except ScheduleMoved:  # claimed meanwhile, still at its version: plan anew
                await before_retry(attempt, f"task {current.name!r}")
        raise AssertionError("unreachable")  # count() never ends; before_retry raises

    def _replacement(
        self, current: Task, spec: TaskSpec, calendars: Calendars
    ) -> TaskUpdate | None:
        """The write that replaces `current`'s writable fields with `spec`, or None when
        they are equal already (what the scheduler filled in carried over: an equal
        definition keeps its version)."""
        wanted = carried(spec, current)
        if wanted == current.spec():
            return None
        task, reschedule = self._service.planned(current, wanted, calendars)
        return TaskUpdate(task, current.version, reschedule, read=current)

    async def _write(self, update: TaskUpdate, actor: str | None) -> Task:
        return await self._store.update_task(
            update.task,
            update.expected_version,
            reschedule=update.reschedule,
            actor=actor,
            read=update.read,
        )

    async def apply(
        self,
        specs: Sequence[TaskSpec],
        *,
        prune: bool = False,
        selector_tag: str | None = None,
        dry_run: bool = False,
        actor: str | None = None,
        indices: Sequence[int] | None = None,
        refused: Sequence[FieldError] = (),
    ) -> ApplyResult:
        """Make the stored tasks match `specs` in one transaction: create the missing,
        replace the changed, leave the equal ones (and their versions); with `prune`,
        delete the stored tasks not listed (only those carrying `selector_tag` when
        given). All or nothing: a bad spec raises InvalidRequest naming `tasks[i].field`
        and nothing is written. With `dry_run`, the same answer and nothing written.
        `indices` are the specs' places in the request's list (by default their own);
        `refused`, what the caller already refused of that list, is raised with what
        this finds, so that one error names every refused task."""
        at = list(indices) if indices is not None else list(range(len(specs)))
        seen: dict[str, int] = {}
        refusals = _Refusals(refused)
        for spec, i in zip(specs, at, strict=True):
            if spec.name in seen:
                refusals.add(i, InvalidRequest("name", f"repeats tasks[{seen[spec.name]}].name"))
                continue
            seen[spec.name] = i
            with refusals.of(i):
                self._executor.check(spec.target, spec.notify)
        scope = HoldScope(
            names=frozenset(seen),
            prune=prune,
            tag=selector_tag,
            calendars=frozenset(c.name for s in specs if (c := s.trigger.calendar_ref())),
        )
        listing = _Listing(specs, at, seen, refusals, scope)
        # A prune decides what to delete from the whole scope it read, and what to keep
        # from it too: two at once, each keeping its own task and deleting the other's,
        # would both land (no row either writes changed) and leave neither file's tasks
        # (an audit's race did, 19 times in 20). So a prune that writes holds its scope
        # from the start: one at a time, each reading what the last one wrote.
        unheld = 0 if prune and not dry_run else UNHELD_ATTEMPTS
        for attempt in count():
            now = truncate(self._clock.now())
            try:
                if attempt < unheld:
                    # Read, decide and write without holding anything: the writes fail
                    # when a task they touch changed meanwhile.
                    stored = await self._store.tasks_covered(scope)  # one snapshot
                    decided = await self._decide(listing, now, stored, self._store)
                    # With nothing to write, the answer is what the read found: it
                    # locks nothing (a redeploy of an unchanged file holds no task).
                    if not dry_run and any(decided.writes):
                        await self._store.apply_tasks(
                            *decided.writes, at=now, actor=actor, kept=decided.kept
                        )
                else:
                    # Lost that often: hold the tasks it may touch while it decides, so
                    # that writers of them wait for it instead (a create of a name it
                    # lists may still come first: that is decided again).
                    async with self._store.hold_tasks(scope) as hold:
                        decided = await self._decide(listing, now, hold.tasks, hold)
                        if not dry_run:
                            await hold.apply_tasks(*decided.writes, at=now, actor=actor)
            except (VersionConflict, DuplicateTaskName, TaskNotFound, TransactionCollided):
                # A task changed meanwhile, or the write met another one (which the
                # database rolled back): read again, decide again.
                await before_retry(attempt, "the task list")
                continue
            return decided.result
        raise AssertionError("unreachable")  # count() never ends; before_retry raises

    async def _decide(
        self, listing: _Listing, now: datetime, tasks: Sequence[Task], reader: CalendarReader
    ) -> _Decided:
        """What one attempt writes, given the stored tasks of the listing's scope (the
        calendars their triggers and the specs' name read from `reader`). Raises
        InvalidRequest naming every refused spec."""
        stored = {task.name: task for task in tasks}
        # Every calendar the specs name, in one read; one not stored is a 422 on
        # `tasks[i].trigger.calendar.name`, raised below by new_task or planned.
        triggers = [spec.trigger for spec in listing.specs] + [t.trigger for t in tasks]
        calendars = await stored_calendars(reader, triggers)
        result = ApplyResult()
        created: list[Task] = []
        updated: list[TaskUpdate] = []
        kept: list[TaskKept] = []
        for spec, i in zip(listing.specs, listing.at, strict=True):
            if listing.seen[spec.name] != i:  # a repeat, refused before
                continue
            current = stored.get(spec.name)
            with listing.refusals.of(i):
                if current is None:
                    created.append(self._service.new_task(spec, now, calendars))
                    result.created.append(spec.name)
                    continue
                update = self._replacement(current, spec, calendars)
                if update is None:
                    result.unchanged.append(spec.name)
                    kept.append(TaskKept(current.id, current.version))
                    continue
                updated.append(update)
                result.updated.append(spec.name)
                result.changes[spec.name] = changes_between(
                    state_of(current), state_of(update.task)
                )
        listing.refusals.raise_any()
        deleted = []
        if listing.scope.prune:  # the scope's tasks not listed: those the selector names
            for name, task in sorted(stored.items()):
                if name not in listing.seen:
                    deleted.append(TaskDelete(task.id, task.version))
                    result.deleted.append(name)
        return _Decided(result, (created, updated, deleted), kept)


@dataclass(frozen=True, slots=True)
class _Decided:
    """One attempt's decision: the answer, the writes (created, updated, deleted), and
    the tasks it answers unchanged, which an unheld write checks are still as read (a
    prune that deleted one meanwhile, while this created a task it would have pruned,
    would leave a state neither order of the two gives)."""

    result: ApplyResult
    writes: tuple[list[Task], list[TaskUpdate], list[TaskDelete]]
    kept: list[TaskKept]


class _Refusals:
    """The refusals of every spec of an apply, each field under `tasks[i]`, raised as
    one InvalidRequest: a file with several bad tasks is told of all of them at once."""

    def __init__(self, refused: Iterable[FieldError] = ()) -> None:
        # What the caller refused already, each under the task it names (a field of the
        # request's own, `prune` say, first).
        self._errors: list[tuple[int, FieldError]] = [(_index_of(e), e) for e in refused]

    def add(self, index: int, refused: InvalidRequest) -> None:
        self._errors += [
            (index, FieldError(f"tasks[{index}].{error.field}", error.message))
            for error in refused.errors
        ]

    @contextmanager
    def of(self, index: int) -> Iterator[None]:
        """Keep what the block refuses about spec `index`, and go on to the next."""
        try:
            yield
        except InvalidRequest as refused:
            self.add(index, refused)

    def raise_any(self) -> None:
        if self._errors:  # in the order of the tasks, each one's in the order found
            raise InvalidRequest.of(
                [error for _, error in sorted(self._errors, key=lambda e: e[0])]
            )


@dataclass(frozen=True, slots=True)
class _Listing:
    """What every attempt of one apply decides from: the specs, their places in the
    request's list, the place each name was first listed at, the refusals found, and
    the stored tasks it may touch."""

    specs: Sequence[TaskSpec]
    at: list[int]
    seen: dict[str, int]
    refusals: _Refusals
    scope: HoldScope


def _index_of(error: FieldError) -> int:
    """The task a field error names (`tasks[3].name`: 3), or -1 for another field."""
    head, _, _ = error.field.partition("]")
    number = head.removeprefix("tasks[")
    return int(number) if head.startswith("tasks[") and number.isdigit() else -1
