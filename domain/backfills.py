"""Backfill: re-running a past range of a task's occurrences (docs/policies.md,
"Backfill").

The rules both stores follow: which fire times a range holds (at most
MAX_BACKFILL, none in the future), which of them `only_missing` leaves out, and how
the runs are placed in the task's slots (the overlap decision of `domain.overlap`,
under the backfill's own `overlap`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal
from uuid import UUID

from domain.claims import new_run
from domain.errors import InvalidRequest
from domain.events import Event, EventRules, TaskRef, new_event
from domain.overlap import MAX_QUEUED, Placement, SlotPlan, Slots, plan
from domain.runs import ClaimedRun, Run, RunStatus
from domain.tasks import EventType, Task
from domain.triggers import Calendars, fire_times

MAX_BACKFILL = 1_000
# A backfill re-runs occurrences of the past; none is older than the Unix epoch.
EARLIEST_BACKFILL = datetime(1970, 1, 1, tzinfo=UTC)

# "buffer_all": the runs wait in the task's queue and take its slots one by one;
# "allow_all": each starts at once, beside every other run of the task.
BackfillOverlap = Literal["buffer_all", "allow_all"]

CANCELLED_BY_BACKFILL = "the backfill was cancelled before the run started"
STOPPED_BY_BACKFILL = "the backfill was cancelled"


@dataclass(frozen=True, slots=True)
class BackfillRequest:
    start: datetime
    end: datetime
    only_missing: bool = True
    overlap: BackfillOverlap = "buffer_all"
    dry_run: bool = False


def backfill_fire_times(
    task: Task,
    start: datetime,
    end: datetime,
    now: datetime,
    calendars: Calendars = None,
    retention: timedelta | None = None,
) -> list[datetime]:
    """The fire times of the task's trigger in `[start, end]`, oldest first.

    Raises InvalidRequest naming the field: a start older than the run `retention` (the
    sweep would delete the runs, and with them every record of the backfill: `start`),
    a reversed range (`end`), a range reaching past `now` (`end`), more than
    MAX_BACKFILL fire times (`end`)."""
    if start < EARLIEST_BACKFILL:
        raise InvalidRequest("start", "must not be before 1970-01-01T00:00:00Z")
    if retention is not None and start < now - retention:
        kept = (now - retention).isoformat().replace("+00:00", "Z")
        raise InvalidRequest(
            "start",
            f"must not be before {kept}: runs scheduled longer ago than the run retention"
            f" ({retention.total_seconds() / 86_400:g} days) are deleted by its sweep, so"
            " the backfill's runs would vanish with their record",
        )
    if end < start:
        raise InvalidRequest("end", "must not be before start")
    if end > now:
        raise InvalidRequest("end", "must not be in the future: a backfill re-runs the past")
    # The trigger's fire times strictly after `after`: step back one second so that a
    # fire time at `start` itself is in the range (instants are whole seconds).
    found = fire_times(task.trigger, start - timedelta(seconds=1), MAX_BACKFILL + 1, calendars)
    inside = [at for at in found if at <= end]
    if len(inside) > MAX_BACKFILL:
        raise InvalidRequest(
            "end", f"the range holds more than {MAX_BACKFILL:,} fire times; backfill it in parts"
        )
    return inside


def missing(occurrences: Iterable[datetime], succeeded: Iterable[datetime]) -> list[datetime]:
    """`only_missing`: the occurrences that have no succeeded run yet."""
    done = set(succeeded)
    return [at for at in occurrences if at not in done]


def check_overlap(task: Task, overlap: BackfillOverlap) -> None:
    """A backfill's runs wait under the backfill's own overlap, whatever the task's
    (`domain.overlap.dropped_queue`), but a paused task keeps no queued run at all (its
    pause cancelled them, a run ending cancels what is left): only `allow_all`
    backfills it."""
    if overlap == "buffer_all" and not task.enabled:
        raise InvalidRequest(
            "overlap",
            'the task is paused, so it keeps no queue: backfill it with "allow_all",'
            " or resume it first",
        )


# A backfill counts the task's queue this far, whatever the task's own overlap: with
# `buffer_all` it queues behind at most MAX_QUEUED runs (`domain.overlap.place`).
BACKFILL_QUEUE_BOUND = MAX_QUEUED


def backfill_plan(overlap: BackfillOverlap, slots: Slots, count: int) -> SlotPlan:
    """Where each of `count` backfilled occurrences goes: with `buffer_all` the same
    decision as claimed occurrences (`domain.overlap.plan`: queued runs first, then each
    starts, waits or, past the queue's bound, is skipped); with `allow_all` each starts."""
    if overlap == "allow_all":
        return SlotPlan(0, (Placement.START,) * count)
    return plan("buffer_all", slots, [RunStatus.RUNNING] * count)


def backfill_run(
    task: Task,
    now: datetime,
    replica: str,
    placement: Placement | None,
    scheduled_for: datetime,
    backfill_id: UUID,
) -> Run:
    """The run of one backfilled occurrence: not manual, so its call carries the
    occurrence's `Idempotency-Key` (`domain.runs.idempotency_key`)."""
    status = RunStatus.QUEUED if placement is None else placement.status
    run = new_run(task, now, replica, status, scheduled_for, 1)
    return run.model_copy(update={"backfill_id": backfill_id})


@dataclass(frozen=True, slots=True)
class Backfill:
    """What a backfill made (with `dry_run`, would make): the occurrences it kept, a run
    for each, and the task's queued runs it started first (its plan's `start_queued`)."""

    backfill_id: UUID
    occurrences: list[datetime]
    made: list[ClaimedRun]
    started: list[ClaimedRun]

    def to_call(self) -> list[ClaimedRun]:
        """The runs this replica calls now: those that took a slot."""
        made = [c for c in self.made if c.run.status is RunStatus.RUNNING]
        return self.started + made


# A backfill's own status: `active` while a run of it is queued or running, then
# `finished`; `cancelled` once `POST /backfills/{id}/cancel` was asked while it was
# active (its running runs may still be ending).
BackfillStatus = Literal["active", "finished", "cancelled"]


@dataclass(frozen=True, slots=True)
class BackfillRecord:
    """A backfill as its store keeps it (a row of its own, so that one that made no runs
    is still read and cancelled)."""

    id: UUID
    task_id: UUID
    task_name: str
    start: datetime
    end: datetime
    overlap: BackfillOverlap
    only_missing: bool
    created_at: datetime
    actor: str | None
    runs: int  # how many runs it made
    status: BackfillStatus = "active"
    finished_at: datetime | None = None


def new_record(
    task: Task,
    made: Backfill,
    span: tuple[datetime, datetime] | None,
    overlap: BackfillOverlap,
    only_missing: bool,
    now: datetime,
    actor: str | None,
) -> BackfillRecord:
    """The record of a backfill just made: finished already when none of its runs waits
    or runs (none made, or every one skipped past the queue's bound)."""
    waiting = any(not claimed.run.status.finished for claimed in made.made)
    if span is None:  # the range its occurrences cover
        span = (made.occurrences[0], made.occurrences[-1]) if made.occurrences else (now, now)
    return BackfillRecord(
        id=made.backfill_id,
        task_id=task.id,
        task_name=task.name,
        start=span[0],
        end=span[1],
        overlap=overlap,
        only_missing=only_missing,
        created_at=now,
        actor=actor,
        runs=len(made.made),
        status="active" if waiting else "finished",
        finished_at=None if waiting else now,
    )


@dataclass(frozen=True, slots=True)
class BackfillState:
    """`GET /backfills/{id}`: the record and its runs counted by status, as they are."""

    record: BackfillRecord
    counts: Mapping[RunStatus, int] = field(default_factory=dict)

    @property
    def pending(self) -> int:
        """Runs still queued or running."""
        return sum(n for status, n in self.counts.items() if not status.finished)

    @property
    def finished(self) -> int:
        return sum(n for status, n in self.counts.items() if status.finished)

    @property
    def by_status(self) -> dict[str, int]:
        """The runs counted by status, as `GET /backfills/{id}` and `backfill.finished`
        tell them: by status name, in name order."""
        return {status.value: n for status, n in sorted(self.counts.items())}

    @property
    def status(self) -> BackfillStatus:
        """The stored status, and `finished` for an active one none of whose runs waits
        any more (its last run ended)."""
        if self.record.status == "active" and self.pending == 0:
            return "finished"
        return self.record.status


def settled(state: BackfillState, now: datetime) -> BackfillRecord | None:
    """The record of an active backfill none of whose runs waits or runs any more: now
    `finished`. None while one still does (or when it was settled already): the store
    calls this under the backfill's row lock, after each write that ends runs of it, so
    that exactly one transaction finishes it."""
    if state.record.status != "active" or state.pending > 0:
        return None
    return dataclasses.replace(state.record, status="finished", finished_at=now)


def settled_at(ended: Iterable[Run]) -> dict[UUID, datetime]:
    """The backfills of these just ended runs, each with the instant it finishes at
    should they be its last: the latest end among its runs here."""
    at: dict[UUID, datetime] = {}
    for run in ended:
        if run.backfill_id is not None and run.finished_at is not None:
            known = at.get(run.backfill_id)
            at[run.backfill_id] = run.finished_at if known is None else max(known, run.finished_at)
    return at


def finished_event(
    rules: EventRules, task: TaskRef | None, state: BackfillState, now: datetime
) -> list[Event]:
    """`backfill.finished` (docs/events.md) of a backfill that just finished or was
    cancelled, as `state` stands: its id, status and runs counted by status. None when
    its task is gone or sends no such event."""
    if task is None:
        return []
    destination = rules.destination(task, EventType.BACKFILL_FINISHED)
    if destination is None:
        return []
    event = new_event(EventType.BACKFILL_FINISHED, task, None, now, destination)
    data = dict(event.payload["data"])  # type: ignore[arg-type]
    data["backfill"] = {
        "id": str(state.record.id),
        "status": state.record.status,
        "runs": state.record.runs,
        "by_status": dict(state.by_status),  # a JSON object of its own
    }
    return [event.model_copy(update={"payload": event.payload | {"data": data}})]
