"""Task history: every change of a task kept as a version, with who made it and why.

A version holds the changed writable fields (old → new) and the task's whole writable
state after the change (`state`), so that the task as it stood at any instant is one
version away (the trigger in force then, whether it was paused and by whom), even after
older versions were swept by retention.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, JsonValue

from domain.tasks import Task

# The pseudo-field a deletion changes: the task's last version says `[false, true]`.
DELETED = "deleted"


class ChangeCause(StrEnum):
    API = "api"  # a request through the API (create, patch, pause, resume, put, apply, delete)
    AUTO_PAUSE = "auto_pause"  # pause_after_failures reached
    CALENDAR = "calendar"  # a calendar the task names changed its schedule


class TaskVersion(BaseModel):
    model_config = ConfigDict(frozen=True)

    task_id: UUID
    version: int
    at: datetime
    actor: str | None = None
    cause: ChangeCause = ChangeCause.API
    changes: dict[str, tuple[JsonValue, JsonValue]]
    state: dict[str, JsonValue] | None  # the writable fields after it; None once deleted


def _version(**fields: Any) -> TaskVersion:
    # Not validated again: each value is built here from a validated task (its state a
    # JSON dump of it), so validating `changes` and `state` would only cost time.
    return TaskVersion.model_construct(**fields)


def state_of(task: Task) -> dict[str, Any]:
    """The writable fields of `task` as JSON values, as a version records them."""
    state: dict[str, Any] = task.spec().model_dump(mode="json")
    return state


def changes_between(
    old: dict[str, Any] | None, new: dict[str, Any]
) -> dict[str, tuple[JsonValue, JsonValue]]:
    """Each field whose value differs, as (old, new); every field, from null, on create."""
    before = old or {}
    return {
        name: (before.get(name), value)
        for name, value in new.items()
        if old is None or before.get(name) != value
    }


def created(task: Task, actor: str | None) -> TaskVersion:
    """Version 1: every field new."""
    state = state_of(task)
    return _version(
        task_id=task.id,
        version=1,
        at=task.created_at,
        actor=actor,
        changes=changes_between(None, state),
        state=state,
    )


def changed(
    old: Task, new: Task, actor: str | None, cause: ChangeCause = ChangeCause.API
) -> TaskVersion:
    """The version `new` (at `new.version`, `new.updated_at`) makes of `old`."""
    state = state_of(new)
    return _version(
        task_id=new.id,
        version=new.version,
        at=new.updated_at,
        actor=actor,
        cause=cause,
        changes=changes_between(state_of(old), state),
        state=state,
    )


def auto_paused(task: Task) -> TaskVersion:
    """The version a pause by `pause_after_failures` made: `task` as paused."""
    return _version(
        task_id=task.id,
        version=task.version,
        at=task.updated_at,
        cause=ChangeCause.AUTO_PAUSE,
        changes={"enabled": (True, False)},
        state=state_of(task),
    )


def deleted(task: Task, at: datetime, actor: str | None) -> TaskVersion:
    """The last version of a task: its deletion (its runs and history stay)."""
    return _version(
        task_id=task.id,
        version=task.version + 1,
        at=at,
        actor=actor,
        changes={DELETED: (False, True)},
        state=None,
    )


def calendar_replanned(
    old: Task, new: Task, versions: tuple[int, int], actor: str | None
) -> TaskVersion:
    """The version a change of the calendar `old` names made (cause calendar): the
    calendar's versions before and after, and `next_fire_at` when it moved. The writable
    fields stay as they were."""
    return _version(
        task_id=new.id,
        version=new.version,
        at=new.updated_at,
        actor=actor,
        cause=ChangeCause.CALENDAR,
        changes=calendar_changes(old.next_fire_at, new.next_fire_at, versions),
        state=state_of(new),
    )


def calendar_changes(
    old: datetime | None, new: datetime | None, versions: tuple[int, int]
) -> dict[str, tuple[JsonValue, JsonValue]]:
    """The `changes` of a calendar re-plan's version (`calendar_replanned`)."""
    changes: dict[str, tuple[JsonValue, JsonValue]] = {"calendar": versions}
    if old != new:
        changes["next_fire_at"] = (_iso(old), _iso(new))
    return changes


def _iso(instant: datetime | None) -> str | None:
    return None if instant is None else instant.strftime("%Y-%m-%dT%H:%M:%SZ")
