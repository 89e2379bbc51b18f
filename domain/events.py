"""Events: what a team is told about its tasks (docs/api.md, "Events").

Pure rules, applied by every store inside the transaction that records the cause:
which events an outcome or a claim raises (`EventRules`), where each goes, and how a
delivery attempt moves an event along its retry schedule (`claimed`, `attempted`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import StrEnum
from typing import Any, TypeVar, cast, get_args
from uuid import UUID, uuid4

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from domain import outcomes
from domain.outcomes import TaskCount, count_outcome
from domain.runs import ClaimedRun, Run, RunStatus
from domain.tasks import Auth, EventType, NoAuth, Notify, Task

# Waits between attempts: doubling from 5 s to at most 10 min, for up to a day.
FIRST_RETRY = timedelta(seconds=5)
LONGEST_RETRY = timedelta(minutes=10)
DELIVERY_WINDOW = timedelta(hours=24)
# Each attempt is given this long; a claim holds an event for the attempt and a margin,
# after which a replica that died mid-delivery has its events taken over by another.
DELIVERY_TIMEOUT_SECONDS = 10.0
CLAIM_LEASE = timedelta(seconds=DELIVERY_TIMEOUT_SECONDS + 20)
ERROR_LIMIT = 1000
_NO_AUTH = NoAuth()


class EventStatus(StrEnum):
    PENDING = "pending"
    SENT = "sent"
    DROPPED = "dropped"


class Destination(BaseModel):
    """Where an event goes, fixed when it is written: a task's `notify`, or the global
    SCHEDULER_EVENTS_URL (no auth). Secrets stay names of variables."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str
    auth: Auth = Field(default_factory=NoAuth)
    headers_env: dict[str, str] = Field(default_factory=dict)


class Event(BaseModel):
    """One outbox row. `payload` is the body every attempt sends, unchanged."""

    model_config = ConfigDict(frozen=True)

    id: UUID
    type: EventType
    task_id: UUID
    task_name: str
    run_id: UUID | None = None
    payload: dict[str, JsonValue]
    destination: Destination
    status: EventStatus = EventStatus.PENDING
    attempts: int = 0
    created_at: datetime
    next_attempt_at: datetime | None  # pending: when it is due (or its claim lapses)
    deadline: datetime  # the last instant an attempt may start
    finished_at: datetime | None = None
    http_status: int | None = None
    last_error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """Where one event's delivery stands: an `Event` without its body and destination,
    as the outbox hands back the attempts it settles. A plain value, not a pydantic
    model: the sender handles thousands a second (docs/performance.md, "Events")."""

    id: UUID
    type: EventType
    task_id: UUID
    task_name: str
    status: EventStatus
    attempts: int
    created_at: datetime
    next_attempt_at: datetime | None
    deadline: datetime
    finished_at: datetime | None = None
    http_status: int | None = None
    last_error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Outgoing(Progress):
    """An event as a claim hands it to the sender: where it goes, and `body`, its
    payload as JSON, made once when the event was written: every attempt sends it."""

    destination: Destination
    body: bytes


# What the delivery rules move along: the full record (the in-memory store keeps those)
# or the sender's plain values.
E = TypeVar("E", bound="Event | Progress")


def _changed(event: E, **fields: Any) -> E:
    if isinstance(event, Event):
        return cast(E, event.model_copy(update=fields))
    return cast(E, dataclasses.replace(event, **fields))


@dataclass(frozen=True, slots=True)
class Delivery:
    """How one attempt went."""

    delivered: bool
    http_status: int | None = None
    error: str | None = None


def retry_wait(attempts: int) -> timedelta:
    """The wait after the `attempts`-th failed attempt: 5 s, 10 s, 20 s, … 10 min."""
    doublings = min(max(attempts - 1, 0), 8)  # 5 s doubled 7 times is past the ceiling
    wait: timedelta = FIRST_RETRY * (1 << doublings)
    return min(wait, LONGEST_RETRY)


def claimed(event: E, now: datetime) -> E:
    """`event` taken for an attempt at `now`: counted, and held for `CLAIM_LEASE`."""
    return _changed(event, attempts=event.attempts + 1, next_attempt_at=now + CLAIM_LEASE)


def attempted(event: E, delivery: Delivery, now: datetime) -> E:
    """`event` after an attempt that ended at `now`: sent; or due again after the
    retry wait; or, when that would start past its deadline, dropped."""
    fields: dict[str, Any] = {"http_status": delivery.http_status}
    if delivery.delivered:
        fields |= {"status": EventStatus.SENT, "next_attempt_at": None, "finished_at": now}
        fields["last_error"] = None
        return _changed(event, **fields)
    fields["last_error"] = (delivery.error or "failed")[:ERROR_LIMIT]
    due = now + retry_wait(event.attempts)
    if due > event.deadline:
        fields |= {"status": EventStatus.DROPPED, "next_attempt_at": None, "finished_at": now}
    else:
        fields["next_attempt_at"] = due
    return _changed(event, **fields)


def lapsed(event: E, now: datetime) -> E | None:
    """An event whose claim lapsed (its replica died mid-delivery) past its deadline:
    dropped. None when it may still be tried."""
    if event.status is EventStatus.PENDING and now > event.deadline:
        return _changed(event, status=EventStatus.DROPPED, next_attempt_at=None, finished_at=now)
    return None


def progress_of(event: Event) -> Progress:
    """`event` as the sender sees a settled attempt."""
    return Progress(**{f.name: getattr(event, f.name) for f in dataclasses.fields(Progress)})


def outgoing(event: Event) -> Outgoing:
    """`event` as a claim hands it to the sender, its body made from its payload."""
    return Outgoing(
        **{f.name: getattr(event, f.name) for f in dataclasses.fields(Progress)},
        destination=event.destination,
        body=payload_json(event.payload).encode(),
    )


def payload_json(payload: Mapping[str, JsonValue]) -> str:
    """The JSON every attempt of an event sends: compact, UTF-8 as is."""
    # pydantic's own encoder (Rust): the same compact text as json.dumps with
    # ensure_ascii=False, about four times faster, and an outcome writes one per event.
    return pydantic_core.to_json(payload).decode()


@dataclass(frozen=True, slots=True)
class TaskRef:
    """What the rules read of a task: its id and name (in the body) and `notify`."""

    id: UUID
    name: str
    notify: Notify | None = None

    @classmethod
    def of(cls, task: Task) -> TaskRef:
        return cls(task.id, task.name, task.notify)


# The runs a claim records that raise an event at once, since no call follows: by
# status, the event's type.
CLAIM_EVENTS = {RunStatus.MISSED: EventType.RUN_MISSED, RunStatus.SKIPPED: EventType.RUN_SKIPPED}


@dataclass(frozen=True, slots=True)
class EventRules:
    """Which events a cause raises, and where they go. `default_url` is
    SCHEDULER_EVENTS_URL: the destination of every task without `notify`."""

    default_url: str | None = None

    def destination(self, task: TaskRef, event_type: EventType) -> Destination | None:
        notify = task.notify
        if notify is not None:
            if event_type not in notify.events:
                return None
            # The task's `notify` was validated: nothing to validate again, per event.
            return Destination.model_construct(
                url=notify.url, auth=notify.auth, headers_env=notify.headers_env
            )
        if self.default_url:
            return Destination.model_construct(url=self.default_url, auth=_NO_AUTH, headers_env={})
        return None

    def on_claim(self, task: TaskRef, run: Run) -> list[Event]:
        """A claim (or a manual fire) recorded `run`: missed and skipped runs raise
        their events at once, since no call follows (CLAIM_EVENTS)."""
        event_type = CLAIM_EVENTS.get(run.status)
        if event_type is None:
            return []
        return self._raise(task, event_type, run, run.claimed_at)

    def on_outcome(
        self, task: TaskRef, run: Run, *, failing_before: bool, counted: bool, paused: bool
    ) -> list[Event]:
        """`run` finished (or was found lost). `failing_before` says whether the task's
        last counted run failed (`Task.failing`: kept through a resume); `counted`
        whether this one counted (a scheduled success or failure); `paused` whether it
        paused the task."""
        now = run.finished_at or run.claimed_at
        events = []
        if run.status is RunStatus.FAILED:
            events += self._raise(task, EventType.RUN_FAILED, run, now)
        if paused:
            events += self._raise(task, EventType.TASK_AUTO_PAUSED, run, now)
        if counted and run.status is RunStatus.SUCCEEDED and failing_before:
            events += self._raise(task, EventType.TASK_RECOVERED, run, now)
        return events

    def _raise(
        self, task: TaskRef, event_type: EventType, run: Run | None, now: datetime
    ) -> list[Event]:
        destination = self.destination(task, event_type)
        if destination is None:
            return []
        return [new_event(event_type, task, run, now, destination)]


def claim_events(rules: EventRules, claimed: Iterable[ClaimedRun]) -> list[Event]:
    """The events a batch of claims (or a manual fire) raises: `EventRules.on_claim`
    of each run recorded, with the task as it was claimed."""
    events: list[Event] = []
    for claimed_run in claimed:
        if claimed_run.run.status in CLAIM_EVENTS:  # most claims raise none: no TaskRef
            events += rules.on_claim(TaskRef.of(claimed_run.task), claimed_run.run)
    return events


def outcome_events(
    rules: EventRules,
    tasks: Mapping[UUID, TaskRef],
    counts_before: Mapping[UUID, TaskCount],
    finished_runs: Iterable[Run],
) -> list[Event]:
    """The events a batch of finished runs raises, counted in the order of the batch as
    `domain.outcomes.count_outcomes` counts them (so a run knows the failures before it,
    and whether it paused its task). `tasks` names the tasks of the runs (a run whose
    task is gone raises nothing); `counts_before` holds those whose count may change."""
    counts = dict(counts_before)
    events: list[Event] = []
    for run in finished_runs:
        count = counts.get(run.task_id)
        failing_before, paused = False, False
        if count is not None:
            after = count_outcome(count, run)
            # `failing` is false on a row of a database upgraded from before it existed:
            # failures counted then still make the next success a recovery.
            failing_before = count.failing or count.consecutive_failures > 0
            paused = after.paused and not count.paused
            counts[run.task_id] = after
        task = tasks.get(run.task_id)
        if task is not None:
            counted = count is not None and outcomes.counts(run)
            events += rules.on_outcome(
                task, run, failing_before=failing_before, counted=counted, paused=paused
            )
    return events


def new_event(
    event_type: EventType,
    task: TaskRef,
    run: Run | None,
    now: datetime,
    destination: Destination,
) -> Event:
    event_id = uuid4()
    payload: dict[str, JsonValue] = {
        "type": event_type.value,
        "timestamp": _rfc3339(now),
        "data": {
            "event_id": str(event_id),
            "task": {"id": str(task.id), "name": task.name},
            "run": None if run is None else run_json(run),
        },
    }
    # Built from validated parts: validating the payload again (a JSON tree) would cost
    # more than the rest of recording an outcome.
    return Event.model_construct(
        id=event_id,
        type=event_type,
        task_id=task.id,
        task_name=task.name,
        run_id=None if run is None else run.id,
        payload=payload,
        destination=destination,
        status=EventStatus.PENDING,
        attempts=0,
        created_at=now,
        next_attempt_at=now,
        deadline=now + DELIVERY_WINDOW,
        finished_at=None,
        http_status=None,
        last_error=None,
    )


def run_json(run: Run) -> dict[str, JsonValue]:
    """`run` as the API shows it: JSON, every instant in UTC."""
    shown: dict[str, JsonValue] = run.model_dump(mode="json")
    for name in _RUN_INSTANTS:
        text = shown[name]
        # pydantic writes an instant in UTC with "Z" already; others are converted.
        if isinstance(text, str) and not text.endswith("Z"):
            shown[name] = _rfc3339(getattr(run, name))
    return shown


_RUN_INSTANTS = tuple(
    name
    for name, field in Run.model_fields.items()
    if field.annotation is datetime or datetime in get_args(field.annotation)
)


def _rfc3339(instant: datetime) -> str:
    if instant.tzinfo is not timezone.utc:
        instant = instant.astimezone(timezone.utc)
    return instant.isoformat().replace("+00:00", "Z")
