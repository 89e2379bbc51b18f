"""Use cases: what people and services ask of the scheduler through the API or CLI.

`SchedulingService` is their one entry; the larger ones live in modules of their own
(`task_listing`, `run_listing`, `history`, `explain`, `previews`), and the bounds every
one checks in `bounds`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from itertools import count
from typing import Any
from uuid import UUID, uuid4

from pydantic import ValidationError

from application.bounds import check_count, check_limit, in_range
from application.calendars import SchedulerStore, calendars_for, check_named
from application.contention import before_retry
from application.explain import explain, explainable
from application.history import task_history
from application.pagination import Page
from application.patching import merge_patch, unknown_removals
from application.ports import (
    Clock,
    Executor,
    RenderedRequest,
    RunDispatcher,
    TaskFilter,
)
from application.previews import preview_trigger
from application.refs import by_id_or_name
from application.run_listing import list_all_runs, list_task_runs
from application.task_listing import list_tasks
from domain.calendars import Calendar
from domain.claims import (
    SECOND,
    complete_trigger,
    first_fire_at_or_after,
    initial_fire_at,
    rescheduled,
    run_instant,
    scheduled,
)
from domain.errors import InvalidRequest, ScheduleMoved, TaskNotFound, VersionConflict
from domain.explain import Explanation
from domain.history import TaskVersion
from domain.instants import truncate
from domain.kept_schedule import carried
from domain.occurrences import MAX_OMISSIONS_TOLD, AnnotatedFireTimes, Omission
from domain.runs import Run, RunStatus
from domain.tasks import Task, TaskSpec
from domain.triggers import TRIGGER_ADAPTER, Calendars, OneShotTrigger, Trigger
from domain.validation import field_errors


class SchedulingService:
    """Every use case of the scheduler, written against the ports only."""

    def __init__(
        self,
        store: SchedulerStore,
        executor: Executor,
        clock: Clock,
        dispatcher: RunDispatcher,
        *,
        replica: str,
    ) -> None:
        self._store = store
        self._executor = executor
        self._clock = clock
        self._dispatcher = dispatcher
        self._replica = replica

    # -- tasks ------------------------------------------------------------------

    async def create_task(self, spec: TaskSpec, *, actor: str | None = None) -> Task:
        """Store a new task, due at its first fire time at or after now.

        Raises InvalidRequest (a one-shot already past its grace, a target the executor
        rejects) and DuplicateTaskName.
        """
        now = truncate(self._clock.now())
        self._executor.check(spec.target, spec.notify)
        calendars = await self.calendars_for(spec.trigger)
        return await self._store.create_task(self.new_task(spec, now, calendars), actor=actor)

    async def calendars_for(
        self, spec: Trigger, current: Trigger | None = None
    ) -> dict[str, Calendar]:
        """The stored calendars the triggers name: `spec`'s (one not stored is a 422 on
        `trigger.calendar.name`) and, on a change, the replaced `current` one's."""
        found = await calendars_for(self._store, spec)
        if current is not None and current.calendar_ref() is not None:
            found = {**await calendars_for(self._store, current, strict=False), **found}
        return found

    def new_task(self, spec: TaskSpec, now: datetime, calendars: Calendars = None) -> Task:
        """The task `spec` makes when created at `now`: due at its first fire time at or
        after now. Raises InvalidRequest for a one-shot already past its grace."""
        check_named(spec.trigger, calendars)
        trigger = complete_trigger(spec.trigger, now)
        task = Task.of_spec(spec, trigger=trigger, id=uuid4(), created_at=now, updated_at=now)
        self._reject_spent_one_shot(task, now)
        return scheduled(task, now, calendars=calendars)

    async def get_task(self, ref: str | UUID) -> Task:
        """The task with this id or, failing that, this name. Raises TaskNotFound."""
        store = self._store
        return await by_id_or_name(ref, store.get_task, store.get_task_by_name, TaskNotFound)

    async def list_tasks(
        self, task_filter: TaskFilter, limit: int = 50, cursor: str | None = None
    ) -> Page[Task]:
        check_limit(limit)
        return await list_tasks(self._store, task_filter, limit, cursor)

    async def update_task(
        self,
        ref: str | UUID,
        patch: dict[str, Any],
        if_match: int | None = None,
        *,
        actor: str | None = None,
    ) -> Task:
        """Apply a JSON merge patch (RFC 7396) to the task's writable fields; `trigger`
        and `target.auth` are replaced whole. Raises InvalidRequest, ValidationError,
        VersionConflict (stale `if_match`), TaskNotFound, DuplicateTaskName."""
        if not isinstance(patch, dict):
            raise InvalidRequest("body", "a merge patch must be a JSON object")
        for attempt in count():
            task = await self.get_task(ref)
            if if_match is not None and task.version != if_match:
                raise VersionConflict(task.id, if_match, task.version)
            merged = merge_patch(task.spec().model_dump(mode="json"), patch, replace=_WHOLE)
            unknown = unknown_removals(patch, TaskSpec, replace=_WHOLE)
            try:
                spec = TaskSpec.model_validate(merged)
            except ValidationError as exc:
                raise InvalidRequest.of([*unknown, *field_errors(exc)]) from None
            if unknown:
                raise InvalidRequest.of(unknown)
            spec = carried(spec, task)  # the same trigger sent again keeps its schedule
            if "target" in patch or "notify" in patch:
                self._executor.check(spec.target, spec.notify)
            try:
                return await self._save(task, spec, actor)
            except ScheduleMoved:
                pass  # claimed meanwhile, still at its version: read it again, plan anew
            except VersionConflict:
                if if_match is not None:
                    raise
            await before_retry(attempt, f"task {task.name!r}")
        raise AssertionError("unreachable")  # count() never ends; before_retry raises

    async def pause_task(self, ref: str | UUID, *, actor: str | None = None) -> Task:
        return await self._set_enabled(ref, enabled=False, actor=actor)

    async def resume_task(self, ref: str | UUID, *, actor: str | None = None) -> Task:
        return await self._set_enabled(ref, enabled=True, actor=actor)

    async def delete_task(
        self, ref: str | UUID, if_match: int | None = None, *, actor: str | None = None
    ) -> None:
        """Delete the task; with `if_match`, only while it is at that version (checked
        again by the store as it deletes). Raises TaskNotFound, VersionConflict."""
        task = await self.get_task(ref)
        if if_match is not None and task.version != if_match:
            raise VersionConflict(task.id, if_match, task.version)
        now = truncate(self._clock.now())
        await self._store.delete_task(task.id, at=now, actor=actor, expected_version=if_match)

    async def explain(self, ref: str | UUID, at: datetime | None) -> Explanation:
        """What became of the occurrence at or just before `at` (default now): see
        `application.explain`."""
        now = truncate(self._clock.now())
        instant = now if at is None else explainable(in_range("at", at))
        return await explain(self._store, self.get_task, ref, instant, now)

    async def task_history(
        self, ref: str | UUID, limit: int = 50, cursor: str | None = None
    ) -> Page[TaskVersion]:
        """The task's versions, newest first: see `application.history`."""
        check_limit(limit)
        return await task_history(self._store, self.get_task, ref, limit=limit, cursor=cursor)

    # -- runs -------------------------------------------------------------------

    async def fire_now(self, ref: str | UUID) -> Run:
        """Start a manual run at once (also for a paused task), unless the task already
        has `max_running_instances` runs in flight or this process makes as many calls as
        it may (then the run is recorded SKIPPED)."""
        task = await self.get_task(ref)
        # Every call slot of this process taken: the run is SKIPPED, said why, rather than
        # left holding the task's slot while it waits (domain/manual_runs.py).
        busy = self._dispatcher.busy()
        claimed = await self._store.start_manual_run(
            task.id, self._clock.now(), self._replica, busy
        )
        # A SKIPPED run too: the dispatcher counts and logs a run it does not call, as
        # the engine does with one it claims SKIPPED.
        self._dispatcher.dispatch(claimed)
        return claimed.run

    async def dry_run(self, ref: str | UUID) -> RenderedRequest:
        """The request the next run would send, rendered, secrets redacted, not sent. A
        task with no next occurrence (paused, spent, past its end) can only run by hand:
        the call a manual run made now would send (its run id made up for the answer)."""
        task = await self.get_task(ref)
        now = truncate(self._clock.now())
        run = Run(
            id=uuid4(),
            task_id=task.id,
            scheduled_for=task.next_fire_at or now,
            claimed_at=now,
            started_at=now,
            status=RunStatus.RUNNING,
            manual=task.next_fire_at is None,
            replica=self._replica,
        )
        return await self._executor.render(task, run, task.last_run_at, redact=True)

    async def list_runs(
        self,
        ref: str | UUID,
        status: RunStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Run]:
        check_limit(limit)
        task = await self.get_task(ref)
        return await list_task_runs(self._store, task.id, status, limit, cursor)

    async def list_all_runs(
        self, *, limit: int = 50, cursor: str | None = None, **filters: Any
    ) -> Page[Run]:
        """Runs of every task, newest first: see `application.run_listing`."""
        check_limit(limit)
        return await list_all_runs(
            self._store, self.get_task, limit=limit, cursor=cursor, **filters
        )

    async def recent_runs(self, task_ids: Sequence[UUID], count: int) -> dict[UUID, list[Run]]:
        """The last `count` runs of each task, newest first, in one read (a page of
        tasks with their recent history, as the console's tasks page shows them)."""
        check_limit(count)
        return await self._store.recent_runs(task_ids, count)

    async def get_run(self, run_id: UUID) -> Run:
        return await self._store.get_run(run_id)

    async def cancel_run(self, run_id: UUID, reason: str | None = None) -> Run:
        """Ask whichever replica runs `run_id` to stop it, the run to end with the error
        `reason` (None: "cancelled through the API"). Raises RunNotRunning."""
        return await self._store.request_cancel(run_id, reason)

    # -- fire times -------------------------------------------------------------

    async def upcoming(self, ref: str | UUID, count: int) -> list[datetime]:
        """The task's next `count` occurrences (un-jittered)."""
        _, listed = await self.upcoming_annotated(ref, count)
        return [occurrence.at for occurrence in listed.occurrences]

    async def upcoming_annotated(
        self, ref: str | UUID, count: int
    ) -> tuple[Task, AnnotatedFireTimes]:
        """The task's next `count` occurrences with their flags, from its next one, and
        the wall-time occurrences from now to the last of them that do not fire (a
        holiday before the next fire time is one the task is about to skip)."""
        check_count(count)
        task = await self.get_task(ref)
        first = task.next_fire_at
        now = truncate(self._clock.now())
        calendars = await calendars_for(self._store, task.trigger, strict=False)
        if first is None and not isinstance(task.trigger, OneShotTrigger):
            first = first_fire_at_or_after(task.trigger, now, calendars)
        if first is None:
            return task, AnnotatedFireTimes()
        listed = task.trigger.annotated(first - SECOND, count, calendars)
        if first > now:
            lead = task.trigger.annotated(now - SECOND, 1, calendars)
            ahead = [omission for omission in lead.omitted if omission.key < first]
            listed = _after_lead(ahead, lead.omitted_truncated, listed)
        return task, listed

    def preview(
        self,
        trigger: dict[str, Any] | Trigger,
        count: int,
        after: datetime | None = None,
        calendars: Sequence[Calendar] = (),
    ) -> list[datetime]:
        """Validate a bare trigger and list its next `count` fire times: strictly after
        `after` when given, else from now on as a task created now would fire."""
        _, listed = self.preview_annotated(trigger, count, after, calendars)
        return [occurrence.at for occurrence in listed.occurrences]

    def preview_annotated(
        self,
        trigger: dict[str, Any] | Trigger,
        count: int,
        after: datetime | None = None,
        calendars: Sequence[Calendar] = (),
    ) -> tuple[Trigger, AnnotatedFireTimes]:
        """`preview`, with each fire time's flags and what did not fire. `calendars` are
        calendars given inline, for trying a policy before any calendar is stored."""
        return preview_trigger(trigger, count, after, calendars, self._clock)

    async def preview_stored(
        self,
        trigger: dict[str, Any] | Trigger,
        count: int,
        after: datetime | None = None,
        calendars: Sequence[Calendar] = (),
    ) -> tuple[Trigger, AnnotatedFireTimes]:
        """`preview_annotated`, where a calendar the trigger names and `calendars` do not
        lend is the stored one of that name (a 422 when none is stored)."""
        if isinstance(trigger, dict):
            try:
                trigger = TRIGGER_ADAPTER.validate_python(trigger)
            except ValidationError as exc:
                raise InvalidRequest.of(field_errors(exc, prefix="trigger")) from None
        ref = trigger.calendar_ref()
        if ref is not None and all(calendar.name != ref.name for calendar in calendars):
            calendars = [*calendars, *(await self.calendars_for(trigger)).values()]
        return self.preview_annotated(trigger, count, after, calendars)

    # -- internals --------------------------------------------------------------

    async def _set_enabled(
        self, ref: str | UUID, *, enabled: bool, actor: str | None = None
    ) -> Task:
        for attempt in count():
            task = await self.get_task(ref)
            if task.enabled is enabled:
                return task
            spec = task.spec().model_copy(update={"enabled": enabled})
            try:
                return await self._save(task, spec, actor)
            except (VersionConflict, ScheduleMoved):
                await before_retry(attempt, f"task {task.name!r}")
        raise AssertionError("unreachable")  # count() never ends; before_retry raises

    async def _save(self, current: Task, spec: TaskSpec, actor: str | None = None) -> Task:
        """Write `spec` over `current`, rescheduling when what decides the schedule changed."""
        calendars = await self.calendars_for(spec.trigger, current.trigger)
        task, reschedule = self.planned(current, spec, calendars)
        return await self._store.update_task(
            task, current.version, reschedule=reschedule, actor=actor, read=current
        )

    def planned(
        self, current: Task, spec: TaskSpec, calendars: Calendars = None
    ) -> tuple[Task, bool]:
        """`current` with `spec` written over it, as `_save` writes it, and whether its
        schedule is written too. Raises InvalidRequest for a one-shot past its grace."""
        check_named(spec.trigger, calendars)
        now = truncate(self._clock.now())
        trigger_changed = spec.trigger != current.trigger
        trigger = complete_trigger(spec.trigger, now) if trigger_changed else current.trigger
        task = current.model_copy(update={**dict(spec), "trigger": trigger, "updated_at": now})
        resumed = spec.enabled and not current.enabled
        if trigger_changed or resumed or spec.enabled != current.enabled:
            if trigger_changed:
                self._reject_spent_one_shot(task, now)
            fired_before = not trigger_changed
            task = rescheduled(task, current.trigger, now, fired_before, calendars)
            if resumed:
                task = task.model_copy(update={"consecutive_failures": 0})
            return task, True
        if spec.jitter_seconds != current.jitter_seconds:
            task = task.model_copy(update={"next_run_at": run_instant(task, task.next_fire_at)})
            return task, True
        return task, False

    def _reject_spent_one_shot(self, task: Task, now: datetime) -> None:
        trigger = task.trigger
        if not isinstance(trigger, OneShotTrigger):
            return
        if initial_fire_at(trigger, now, task.misfire_grace_seconds) is None:
            raise InvalidRequest(
                "trigger.run_at",
                "is in the past by more than misfire_grace_seconds; it would never fire",
            )


# `trigger` and each `auth` are replaced whole by a merge patch, never merged.
_WHOLE: Sequence[tuple[str, ...]] = (("trigger",), ("target", "auth"), ("notify", "auth"))


def _after_lead(
    ahead: list[Omission], ahead_cut: bool, listed: AnnotatedFireTimes
) -> AnnotatedFireTimes:
    """`listed` with the omissions `ahead` of its first fire time told first, at most
    MAX_OMISSIONS_TOLD in all (a lead cut short tells nothing after it)."""
    told = ahead if ahead_cut else ahead + listed.omitted
    cut = ahead_cut or listed.omitted_truncated or len(told) > MAX_OMISSIONS_TOLD
    return AnnotatedFireTimes(listed.occurrences, told[:MAX_OMISSIONS_TOLD], cut)
