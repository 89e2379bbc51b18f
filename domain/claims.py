"""The claim rule: what claiming a due task at an instant means.

Every store applies these functions to the rows it locked, so the rule is written
once. Coalescing is not a flag: a claim advances past every due occurrence at once,
and the run it records stands for all of them.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from uuid import UUID, uuid4
from zoneinfo import ZoneInfo

from domain.instants import truncate
from domain.runs import Run, RunStatus
from domain.tasks import HttpTarget, OAuth2ClientCredentials, Task
from domain.triggers import Calendars, CalendarTrigger, IntervalTrigger, OneShotTrigger, Trigger

SECOND = timedelta(seconds=1)
# Slack on every lease so that a run finishing at its very deadline still owns its slot.
LEASE_MARGIN = timedelta(seconds=30)
# How many due occurrences one claim counts one by one. Beyond this (months of a
# per-minute cron missed), the count stops and the claim jumps straight to the end.
MAX_COUNTED_OCCURRENCES = 100_000
BEGINNING_OF_TIME = datetime(1, 1, 2, tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True)
class EarlierRun:
    """A run a `catch_up: "all"` claim makes before the latest occurrence's: the
    occurrences folded past the grace (MISSED) or one caught-up occurrence (RUNNING)."""

    status: RunStatus
    scheduled_for: datetime
    coalesced: int
    error: str | None = None  # a MISSED run's reason, when not the grace's (NOT_CALLED)


@dataclass(frozen=True, slots=True)
class ClaimDecision:
    """What claiming one task decided.

    Attributes:
        status: RUNNING (call the target, subject to free lease slots) or MISSED.
        scheduled_for: the latest due occurrence, un-jittered.
        coalesced: how many due occurrences this run stands for.
        next_fire_at: the task's next un-jittered occurrence, None when exhausted.
        next_run_at: `next_fire_at` plus its jitter: when the task is due again.
        lateness: how late the claim is against the occurrence's jittered instant.
        earlier: with `catch_up: "all"`, the runs recorded before this one, oldest
            first (then `coalesced` is 1); empty with `catch_up: "latest"`.
    """

    status: RunStatus
    scheduled_for: datetime
    coalesced: int
    next_fire_at: datetime | None
    next_run_at: datetime | None
    lateness: timedelta
    earlier: tuple[EarlierRun, ...] = ()


def jitter_offset(task_id: UUID, occurrence: datetime, jitter_seconds: int) -> timedelta:
    """A whole number of seconds in [0, jitter_seconds), the same on every replica."""
    if jitter_seconds <= 1:
        return timedelta(0)
    key = f"{task_id}:{int(occurrence.timestamp())}".encode()
    digest = hashlib.blake2b(key, digest_size=8).digest()
    return timedelta(seconds=int.from_bytes(digest, "big") % jitter_seconds)


def run_instant(task: Task, occurrence: datetime | None) -> datetime | None:
    """When `occurrence` of `task` is called: the occurrence plus its jitter."""
    if occurrence is None or task.jitter_seconds <= 1:  # no offset: most tasks, every claim
        return occurrence
    return occurrence + jitter_offset(task.id, occurrence, task.jitter_seconds)


def first_fire_at_or_after(
    trigger: Trigger, instant: datetime, calendars: Calendars = None
) -> datetime | None:
    """The first fire time at or after `instant` (create, resume, trigger change)."""
    return trigger.next_fire_time(truncate(instant) - SECOND, calendars)


def initial_fire_at(
    trigger: Trigger,
    now: datetime,
    misfire_grace_seconds: int | None,
    calendars: Calendars = None,
) -> datetime | None:
    """The first occurrence a new or resumed task is due for.

    A one-shot whose `run_at` passed within the grace time is still due (it fires at
    once); every other trigger starts at its first fire time at or after `now`.
    """
    if isinstance(trigger, OneShotTrigger):
        run_at = trigger.next_fire_time(BEGINNING_OF_TIME)
        if run_at is not None and run_at < truncate(now):
            late = truncate(now) - run_at
            if misfire_grace_seconds is None or late <= timedelta(seconds=misfire_grace_seconds):
                return run_at
            return None
    return first_fire_at_or_after(trigger, now, calendars)


def complete_trigger(trigger: Trigger, now: datetime) -> Trigger:
    """Fill in what a trigger takes from the moment it is created (docs/triggers.md,
    "Interval" and "Calendar"): an interval without `start_at` is anchored now, a
    calendar without `start_date` starts today in its timezone."""
    if isinstance(trigger, IntervalTrigger) and trigger.start_at is None and trigger.anchor is None:
        return trigger.model_copy(update={"anchor": now})
    if isinstance(trigger, CalendarTrigger) and trigger.start_date is None:
        if trigger.start_at is not None:
            return trigger
        today = now.astimezone(ZoneInfo(trigger.timezone)).date()
        return trigger.model_copy(update={"start_date": today})
    return trigger


def scheduled(
    task: Task, now: datetime, *, fired_before: bool = False, calendars: Calendars = None
) -> Task:
    """`task` with `next_fire_at`/`next_run_at` set as on create or resume: a disabled
    task, or a one-shot that has fired already (`fired_before` and a `last_run_at`), is
    due never; any other at `initial_fire_at`, plus its jitter."""
    next_fire_at = None
    if task.enabled:
        spent = fired_before and isinstance(task.trigger, OneShotTrigger) and task.last_run_at
        if not spent:
            next_fire_at = initial_fire_at(task.trigger, now, task.misfire_grace_seconds, calendars)
    return task.model_copy(
        update={"next_fire_at": next_fire_at, "next_run_at": run_instant(task, next_fire_at)}
    )


def rescheduled(
    task: Task,
    previous: Trigger,
    now: datetime,
    fired_before: bool,
    calendars: Calendars = None,
) -> Task:
    """`task` planned again on resume or on a trigger change at `now` (docs/api.md "When
    the first occurrence is"): as `scheduled`, but after this very second when the
    replaced schedule (`previous`) has an occurrence in it, and after `claimed_through`
    (what a claim took, under any trigger): such an instant claimed again would be a
    second run with its `Idempotency-Key`. `calendars`: those both triggers name."""
    now = truncate(now)
    one_shot = isinstance(task.trigger, OneShotTrigger)
    if not one_shot and first_fire_at_or_after(previous, now, calendars) == now:
        now += SECOND
    claimed = task.claimed_through
    if not one_shot and claimed is not None and claimed >= now:
        now = claimed + SECOND
    return scheduled(task, now, fired_before=fired_before, calendars=calendars)


def claim(task: Task, now: datetime, calendars: Calendars = None) -> ClaimDecision | None:
    """Decide what claiming `task` at `now` means, or None when it is not due.
    `calendars` holds the calendar the task's trigger names, if it names one.

    Every occurrence whose jittered instant is at or before `now` is due; they fold
    into one run for the latest of them, and the misfire grace is measured from that
    one's jittered instant.
    """
    now = truncate(now)
    first = task.next_fire_at
    if not task.enabled or first is None:
        return None
    due_at = run_instant(task, first)
    if due_at is None or due_at > now:
        return None
    count, latest, following = _advance(task, first, now, calendars)
    next_run_at = run_instant(task, following)
    lateness = now - (run_instant(task, latest) or latest)
    grace = task.misfire_grace_seconds
    missed = grace is not None and lateness > timedelta(seconds=grace)
    if missed or count == 1 or task.catch_up == "latest":
        # Past the grace, the latest is missed and so is every older one: "all" folds
        # them as "latest" does.
        return ClaimDecision(
            status=RunStatus.MISSED if missed else RunStatus.RUNNING,
            scheduled_for=latest,
            coalesced=count,
            next_fire_at=following,
            next_run_at=next_run_at,
            lateness=lateness,
        )
    return ClaimDecision(
        status=RunStatus.RUNNING,
        scheduled_for=latest,
        coalesced=1,
        next_fire_at=following,
        next_run_at=next_run_at,
        lateness=lateness,
        earlier=_catch_up(task, first, now, count, latest, calendars),
    )


def _catch_up(
    task: Task,
    first: datetime,
    now: datetime,
    count: int,
    latest: datetime,
    calendars: Calendars = None,
) -> tuple[EarlierRun, ...]:
    """The runs before the latest's of a `catch_up: "all"` backlog of `count` due
    occurrences from `first` to `latest`: each of the newest `max_catch_up` (the latest's
    among them) within the grace a RUNNING run of its own, oldest first, after one MISSED
    run standing for every older occurrence (at the latest of those)."""
    grace = task.misfire_grace_seconds
    tail = _newest(task, first, count, latest, task.max_catch_up + 1, calendars)
    # The extra one (when the backlog is longer than max_catch_up) folds whatever
    # its grace, as does everything before it.
    kept = tail[-task.max_catch_up :]
    folded_count = count - len(kept)
    folded_last = tail[0] if len(tail) > len(kept) else None
    caught_up: list[datetime] = []
    past_grace = False  # whether the newest folded one was folded for its lateness
    for occurrence in kept[:-1]:
        lateness = now - (run_instant(task, occurrence) or occurrence)
        if grace is not None and lateness > timedelta(seconds=grace):
            folded_count, folded_last, past_grace = folded_count + 1, occurrence, True
        else:
            caught_up.append(occurrence)
    runs = [EarlierRun(RunStatus.RUNNING, occurrence, 1) for occurrence in caught_up]
    if folded_count:
        # Past MAX_COUNTED_OCCURRENCES the folded ones are not known one by one; their
        # run then stands at the first of them.
        at = folded_last or first
        # Why, as the newest folded one says: past the grace, or beyond the limit.
        error = None if past_grace else BEYOND_CATCH_UP.format(limit=task.max_catch_up)
        runs.insert(0, EarlierRun(RunStatus.MISSED, at, folded_count, error))
    return tuple(runs)


def _newest(
    task: Task,
    first: datetime,
    count: int,
    latest: datetime,
    keep: int,
    calendars: Calendars = None,
) -> list[datetime]:
    """The newest `keep` of the `count` due occurrences from `first` to `latest`, oldest
    first. An interval steps back by arithmetic; other triggers are walked from `first`
    (as `_advance` did, so no dearer); past MAX_COUNTED_OCCURRENCES only `latest` is known."""
    trigger = task.trigger
    if isinstance(trigger, IntervalTrigger) and trigger.calendar is None:
        every = timedelta(seconds=trigger.every)
        return [latest - steps * every for steps in range(min(keep, count) - 1, -1, -1)]
    if count >= MAX_COUNTED_OCCURRENCES:
        return [latest]
    newest: deque[datetime] = deque(maxlen=keep)
    occurrence: datetime | None = first
    while occurrence is not None and occurrence <= latest:
        newest.append(occurrence)
        occurrence = trigger.next_fire_time(occurrence, calendars)
    return list(newest)


def _advance(
    task: Task, first: datetime, now: datetime, calendars: Calendars = None
) -> tuple[int, datetime, datetime | None]:
    """Count the due occurrences from `first`: (count, latest due, first not due)."""
    trigger = task.trigger
    jitter = timedelta(seconds=task.jitter_seconds)
    # Occurrences at or before `now - jitter` are due whatever their offset; an
    # interval counts them by arithmetic, so a long downtime costs nothing.
    count, latest = 0, first
    occurrence: datetime | None = first
    if isinstance(trigger, IntervalTrigger) and trigger.calendar is None and first <= now - jitter:
        every = timedelta(seconds=trigger.every)
        steps = (now - jitter - first) // every
        skipped_to = first + steps * every
        # Only when that is a real occurrence (an `end_at` may come first); `first` is
        # one, and the usual claim (one occurrence due) need not ask.
        if steps == 0 or trigger.next_fire_time(skipped_to - SECOND) == skipped_to:
            count, latest = steps + 1, skipped_to
            occurrence = trigger.next_fire_time(skipped_to)
    while occurrence is not None:
        instant = run_instant(task, occurrence)
        if instant is None or instant > now:
            break
        count, latest = count + 1, occurrence
        if count >= MAX_COUNTED_OCCURRENCES:
            return count, *_jump(trigger, now, calendars)
        occurrence = trigger.next_fire_time(occurrence, calendars)
    return count, latest, occurrence


def _jump(
    trigger: Trigger, now: datetime, calendars: Calendars = None
) -> tuple[datetime, datetime | None]:
    """The latest occurrence at or before `now` and the one after, found without
    stepping through every occurrence (looking back ever further from `now`)."""
    following = trigger.next_fire_time(now, calendars)
    back = SECOND
    while True:
        candidate: datetime | None = trigger.next_fire_time(now - back, calendars)
        if candidate is not None and candidate <= now:
            # Step forward to the last one not after `now`.
            nxt = trigger.next_fire_time(candidate, calendars)
            while nxt is not None and nxt <= now:
                candidate, nxt = nxt, trigger.next_fire_time(nxt, calendars)
            return candidate, following
        back *= 2


def lease_duration(target: HttpTarget) -> timedelta:
    """How long a run may hold its slot: every attempt timing out, every retry
    waiting its longest, plus a margin (docs/api.md "Run", `lease_expires_at`)."""
    attempts = target.retry.max_attempts
    if isinstance(target.auth, OAuth2ClientCredentials):
        attempts += 1  # a 401 earns one more call with a fresh token
    seconds = target.timeout_seconds * attempts + target.retry.total_wait()
    return timedelta(seconds=seconds) + LEASE_MARGIN


def resolve_status(decision_status: RunStatus, active_leases: int, limit: int) -> RunStatus:
    """A run that should fire is SKIPPED when the task already has `limit` runs in flight."""
    if decision_status is RunStatus.RUNNING and active_leases >= limit:
        return RunStatus.SKIPPED
    return decision_status


# A catch-up's MISSED run for the occurrences older than those `max_catch_up` lets run.
BEYOND_CATCH_UP = (
    "older than the newest max_catch_up = {limit} occurrences of the catch-up; not called"
)
# The error a run that was not called records.
NOT_CALLED = {
    RunStatus.MISSED: "claimed later than misfire_grace_seconds after its time; not called",
    RunStatus.SKIPPED: "max_running_instances runs were in flight; not called",
}


def new_run(
    task: Task,
    now: datetime,
    replica: str,
    status: RunStatus,
    scheduled_for: datetime,
    coalesced: int,
    *,
    manual: bool = False,
    error: str | None = None,
) -> Run:
    """A run claimed at `now`: RUNNING with a lease, QUEUED (no lease, not started yet),
    or already finished when not called, with `error` (a MISSED run's reason) or the
    status's NOT_CALLED."""
    claimed_at = truncate(now)
    running = status is RunStatus.RUNNING
    waiting = status is RunStatus.QUEUED
    return Run(
        id=uuid4(),
        task_id=task.id,
        scheduled_for=scheduled_for,
        coalesced=coalesced,
        claimed_at=claimed_at,
        started_at=claimed_at if running else None,
        finished_at=None if running or waiting else claimed_at,
        lease_expires_at=claimed_at + lease_duration(task.target) if running else None,
        status=status,
        manual=manual,
        error=(error if status is RunStatus.MISSED else None) or NOT_CALLED.get(status),
        replica=replica,
    )


def claimed_task_fields(
    task: Task, decision: ClaimDecision | None, run: Run | None
) -> dict[str, Any]:
    """The schedule fields a claim writes on `task`: advanced past the occurrences
    `decision` folded, with `last_run_at` at the claim when `run` is called.

    Without a decision (the task looked due by `next_run_at`, yet its `next_fire_at`
    is not), `next_run_at` is mended to agree with `next_fire_at`, so that the row does
    not stand at the head of every claim.
    """
    if decision is None:
        return {
            "next_fire_at": task.next_fire_at,
            "next_run_at": run_instant(task, task.next_fire_at),
            "last_run_at": task.last_run_at,
            "claimed_through": task.claimed_through,
        }
    called = run is not None and run.status is RunStatus.RUNNING
    return {
        "next_fire_at": decision.next_fire_at,
        "next_run_at": decision.next_run_at,
        "last_run_at": run.claimed_at if run is not None and called else task.last_run_at,
        "claimed_through": decision.scheduled_for,
    }
