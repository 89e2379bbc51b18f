"""What the API sends and receives beyond the domain's own models (docs/api.md "Task" and "Run").

Requests reuse the domain models (`TaskSpec`, `Trigger`): they are the validation. The
responses here add what a client sees: every instant in UTC, and no internal fields.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Annotated, Any, Literal
from uuid import UUID
from zoneinfo import ZoneInfo

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    create_model,
)

from domain.backfills import BackfillOverlap
from domain.calendars import Calendar
from domain.claims import run_instant
from domain.credential_headers import redacted_fields, redacted_headers
from domain.explain import Explanation, Verdict
from domain.history import ChangeCause, TaskVersion
from domain.names import TAG_PATTERN
from domain.occurrences import AnnotatedFireTimes
from domain.runs import Run
from domain.tasks import HttpTarget, Notify, Task, TaskSpec
from domain.triggers import Trigger


def _utc(value: datetime) -> datetime:
    # Every instant an answer gives is in UTC and whole seconds (docs/api.md, "Times"),
    # also those kept to the microsecond (an event's delivery times).
    utc = value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return utc.replace(microsecond=0)


UtcDatetime = Annotated[datetime, AfterValidator(_utc)]


class TaskResource(TaskSpec):
    """A task (docs/api.md "Task"): its writable fields and what the scheduler keeps."""

    id: UUID
    consecutive_failures: int = 0
    next_run_at: UtcDatetime | None = Field(
        default=None, description="the next occurrence (jitter included); null when none"
    )
    last_run_at: UtcDatetime | None = None
    created_at: UtcDatetime
    updated_at: UtcDatetime
    version: int = Field(description="increases on every change; the ETag")

    @classmethod
    def of(cls, task: Task) -> TaskResource:
        # Not validated again (a task was, as a spec or from its row): its parts are
        # shared, and its instants put in UTC as validation would put them.
        fields: dict[str, Any] = {
            name: _utc(value) if isinstance(value := getattr(task, name), datetime) else value
            for name in cls.model_fields
        }
        headers = redacted_headers(task.target.headers)  # a task stored before the rule
        if headers is not task.target.headers:
            fields["target"] = task.target.model_copy(update={"headers": headers})
        return cls.model_construct(**fields)


class RunResource(Run):
    """A run (docs/api.md "Run")."""

    scheduled_for: UtcDatetime
    claimed_at: UtcDatetime
    started_at: UtcDatetime | None = None
    finished_at: UtcDatetime | None = None
    lease_expires_at: UtcDatetime | None = None

    @classmethod
    def of(cls, run: Run) -> RunResource:
        return cls.model_validate(run.model_dump())


class TaskPage(BaseModel):
    items: list[TaskResource]
    next_cursor: str | None = Field(
        description="pass as ?cursor= for the next page; null at the end"
    )


class RunPage(BaseModel):
    items: list[RunResource]
    next_cursor: str | None = Field(
        description="pass as ?cursor= for the next page; null at the end"
    )


class HistoryItem(BaseModel):
    """One version of a task: when, by whom, why, and what changed (old, new)."""

    version: int
    at: UtcDatetime
    actor: str | None = Field(description="the API token's label; null without one")
    changes: dict[str, tuple[JsonValue, JsonValue]] = Field(
        description='each changed field as [old, new]; a deletion is {"deleted": [false, true]}'
    )
    cause: ChangeCause

    @classmethod
    def of(cls, version: TaskVersion) -> HistoryItem:
        fields = version.model_dump(exclude={"task_id", "state"})
        fields["changes"] = redacted_changes(fields["changes"])
        return cls.model_validate(fields)


def redacted_changes(
    changes: Mapping[str, Sequence[JsonValue]],
) -> dict[str, tuple[JsonValue, ...]]:
    """Changed fields as [old, new], a literal credential header of a task stored before
    they were refused shown `***` (history, an apply's changes)."""
    return {
        field: tuple(_redacted(field, value) for value in change)
        for field, change in changes.items()
    }


def _redacted(field: str, value: JsonValue) -> JsonValue:
    # A version stored before credential headers were refused may hold one.
    redacted: JsonValue = redacted_fields({field: value})[field]
    return redacted


class HistoryPage(BaseModel):
    items: list[HistoryItem]
    next_cursor: str | None = Field(
        description="pass as ?cursor= for the next (older) page; null at the end"
    )


def _unset(value: object) -> bool:
    return value is None


class OccurrenceResource(BaseModel):
    """One fire time, annotated (docs/api.md "Annotated fire times")."""

    at: UtcDatetime
    local: str = Field(description="the instant in the trigger's zone, with its offset")
    wall: str = Field(description="HH:MM:SS, the wall time the trigger named")
    flags: list[
        Literal[
            "gap_shifted", "gap_transition", "fold_first", "fold_second", "month_clamped", "rolled"
        ]
    ]
    rolled_from: dt.date | None = Field(
        default=None, exclude_if=_unset, description="the date a rolled fire time was named on"
    )
    run_at: UtcDatetime | None = Field(
        default=None, exclude_if=_unset, description="tasks only: the instant with jitter"
    )


class OmissionResource(BaseModel):
    """A wall-time occurrence in the listed span that does not fire, and why."""

    date: dt.date
    wall: str
    reason: Literal["dst_gap", "excluded", "rolled_away", "merged"]
    calendar: str | None


class ExplainAnswer(BaseModel):
    """What became of one occurrence (docs/api.md "Explain")."""

    occurrence: UtcDatetime | None = Field(
        description="the fire time at or just before `at` under the trigger in force then"
    )
    verdict: Verdict
    detail: str = Field(description="one plain sentence saying why")
    runs: list[RunResource]
    task_version: int | None = Field(description="the task's version in force at `at`")

    @classmethod
    def of(cls, explanation: Explanation) -> ExplainAnswer:
        return cls(
            occurrence=explanation.occurrence,
            verdict=explanation.verdict,
            detail=explanation.detail,
            runs=[RunResource.of(run) for run in explanation.runs],
            task_version=explanation.task_version,
        )


class FireTimes(BaseModel):
    fire_times: list[UtcDatetime]
    occurrences: list[OccurrenceResource] | None = Field(
        default=None, exclude_if=_unset, description="with annotate: each fire time annotated"
    )
    omitted: list[OmissionResource] | None = Field(
        default=None, exclude_if=_unset, description="with annotate: what did not fire, and why"
    )
    omitted_truncated: bool | None = Field(
        default=None,
        exclude_if=_unset,
        description="with annotate, only when true: `omitted` tells the first 1,000 of more"
        " wall times that did not fire (the fire times are complete)",
    )

    @classmethod
    def annotated(
        cls, listed: AnnotatedFireTimes, zone_name: str, task: Task | None = None
    ) -> FireTimes:
        tz = ZoneInfo(zone_name)
        occurrences = [
            OccurrenceResource(
                at=o.at,
                local=o.at.astimezone(tz).isoformat(),
                wall=o.wall.time().isoformat(),
                flags=list(o.flags),
                rolled_from=o.rolled_from,
                run_at=run_instant(task, o.at) if task is not None else None,
            )
            for o in listed.occurrences
        ]
        omitted = [
            OmissionResource(
                date=o.date, wall=o.wall.isoformat(), reason=o.reason, calendar=o.calendar
            )
            for o in listed.omitted
        ]
        return cls(
            fire_times=[o.at for o in listed.occurrences],
            occurrences=occurrences,
            omitted=omitted,
            omitted_truncated=True if listed.omitted_truncated else None,
        )


class PreviewRequest(BaseModel):
    """A bare trigger to validate and list fire times of, without creating anything."""

    model_config = ConfigDict(extra="forbid")

    trigger: Trigger
    count: int = Field(default=10, ge=1, le=100)
    after: datetime | None = Field(
        default=None,
        description="list fire times strictly after this instant (with offset); "
        "default: from now, as a task created now would fire",
    )
    annotate: bool = Field(
        default=False, description="add `occurrences` (with flags) and `omitted` to the answer"
    )
    calendars: list[Calendar] = Field(
        default_factory=list,
        max_length=20,
        description="calendars given inline, by name, for trying a trigger's calendar policy"
        " before the calendar is stored",
    )


class Health(BaseModel):
    status: str


class Ready(BaseModel):
    status: str
    checks: dict[str, str] = Field(description="each check and its state: ok, or what failed")


def _partial(model: type[BaseModel], name: str, **nested: Any) -> type[BaseModel]:
    """`model` with every field optional (null removes it): the shape of a merge patch."""
    fields: dict[str, Any] = {}
    for field_name, info in model.model_fields.items():
        annotation: Any = nested.get(field_name) or info.annotation
        if info.metadata and field_name not in nested:
            annotation = Annotated[(annotation, *info.metadata)]
        # A tagged union (a trigger, an auth) keeps its tag: a patch is validated too
        # (entrypoints/http/body.py), and its errors name the member as a body's do.
        fields[field_name] = (
            annotation | None,
            Field(default=None, description=info.description, discriminator=info.discriminator),
        )
    config = ConfigDict(extra="forbid")
    partial: type[BaseModel] = create_model(name, __config__=config, **fields)
    partial.__doc__ = (
        f"A JSON merge patch (RFC 7396) of {model.__name__}: members left out stay, "
        "members set to null are reset to their default."
    )
    return partial


TargetPatch = _partial(HttpTarget, "TargetPatch")
NotifyPatch = _partial(Notify, "NotifyPatch")
# `trigger`, `target.auth` and `notify.auth` are replaced whole; `target` and `notify` are
# merged member by member.
TaskPatch = _partial(TaskSpec, "TaskPatch", target=TargetPatch, notify=NotifyPatch)


def _by_name(model: type[BaseModel], name: str) -> type[BaseModel]:
    """The body of a PUT by name, as documented: `model` with `name` optional, since the
    path gives it (the route validates the body as `model`, with the path's name)."""
    info = model.model_fields["name"]
    # A factory's default is left out of the schema: a client has none to rely on.
    field = Field(default_factory=str, description="the name in the path, or left out")
    variant: type[BaseModel] = create_model(
        name, __base__=model, name=(Annotated[(str, *info.metadata)], field)
    )
    variant.__doc__ = f"{model.__name__}, with `name` left out or the one in the path."
    return variant


# What `PUT /tasks/{name}` takes.
TaskSpecByName = _by_name(TaskSpec, "TaskSpecByName")


# The bodies of POST /tasks/apply and POST /tasks/{id}/backfill (entrypoints.http.sync,
# entrypoints.http.backfills), here so that the OpenAPI document (entrypoints.http.docs)
# can take their schemas from pydantic.


class Selector(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Required: an empty selector (a deploy template whose tag came out empty) would
    # otherwise let prune delete every task not listed. Leave `selector` out for that.
    tag: str = Field(pattern=TAG_PATTERN)


class ApplyRequest(BaseModel):
    """The tasks that should exist, by name; what prune may delete; whether to write."""

    model_config = ConfigDict(extra="forbid")

    tasks: list[TaskSpec] = Field(max_length=100_000)
    prune: bool = Field(
        default=False, description="delete stored tasks not listed (those the selector picks)"
    )
    selector: Selector | None = Field(
        default=None,
        description="what prune may delete: tasks carrying `tag` (left out: every task)",
    )
    dry_run: bool = Field(default=False, description="answer what would change, write nothing")


class BackfillBody(BaseModel):
    """A past range of a task's occurrences to run again."""

    model_config = ConfigDict(extra="forbid")

    start: AwareDatetime = Field(description="the first instant of the range (with offset)")
    end: AwareDatetime = Field(
        description="the last instant of the range, inclusive; not after now"
    )
    only_missing: bool = Field(
        default=True, description="leave out occurrences that already have a succeeded run"
    )
    overlap: BackfillOverlap = Field(
        default="buffer_all",
        description='"buffer_all": the runs wait in the task\'s queue and take its slots in '
        'order; "allow_all": each starts at once, beside every other run',
    )
    dry_run: bool = Field(default=False, description="answer what would be made; write nothing")
