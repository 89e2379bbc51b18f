"""Rows to domain models and back. Trigger and target cross as JSON through their
pydantic models, validated both ways; nothing is pickled."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from psycopg.types.json import Jsonb

from domain.history import TaskVersion
from domain.read_back import READ_BACK
from domain.runs import Run
from domain.tasks import HttpTarget, Notify, Task
from domain.triggers import TRIGGER_ADAPTER, Trigger


def task_row(task: Task) -> dict[str, Any]:
    """A new task's row as JSON, as insert_tasks reads it (jsonb_populate_recordset):
    every column, the version 1."""
    row: dict[str, Any] = task.model_dump(mode="json")
    row["version"] = 1
    return row


def task_row_text(task: Task) -> str:
    """`task_row` of a task at version 1, as JSON text (create_task's `row`): dumped by
    pydantic in one step rather than to Python values and then by the json module."""
    assert task.version == 1, "a new task's row is at version 1"
    return task.model_dump_json()


def task_params(task: Task) -> dict[str, Any]:
    """The parameters of update_task."""
    return {
        "id": task.id,
        "name": task.name,
        "description": task.description,
        "trigger": Jsonb(task.trigger.model_dump(mode="json")),
        "target": Jsonb(task.target.model_dump(mode="json")),
        "enabled": task.enabled,
        "tags": list(task.tags),
        "misfire_grace_seconds": task.misfire_grace_seconds,
        "max_running_instances": task.max_running_instances,
        "jitter_seconds": task.jitter_seconds,
        "pause_after_failures": task.pause_after_failures,
        "catch_up": task.catch_up,
        "max_catch_up": task.max_catch_up,
        "overlap": task.overlap,
        "notify": None if task.notify is None else Jsonb(task.notify.model_dump(mode="json")),
        "history_limit": task.history_limit,
        "consecutive_failures": task.consecutive_failures,
        "next_fire_at": task.next_fire_at,
        "next_run_at": task.next_run_at,
        "last_run_at": task.last_run_at,
        "created_at": task.created_at,
        "updated_at": task.updated_at,
    }


@lru_cache(maxsize=16_384)
def _trigger(text: str) -> Trigger:
    # A trigger is an immutable value (docs/triggers.md, "Every kind": plain data):
    # tasks whose trigger JSON is equal may share one validated model. Cron parsing is
    # the dear part. Room for a fleet's distinct triggers: a calendar re-plan reads
    # every task naming it, and 10,000 distinct ones evicted each other at 4,096.
    return TRIGGER_ADAPTER.validate_json(text, context=READ_BACK)  # rules it predates pass


def to_trigger(text: str) -> Trigger:
    """A trigger from its JSON text (shared by equal texts, as `to_task`'s)."""
    return _trigger(text)


@lru_cache(maxsize=4096)
def _target(text: str) -> HttpTarget:
    # Likewise a frozen value: nothing changes a target's headers or body in place (the
    # executors copy them), so tasks calling the same target may share its model. Many
    # tasks do, and a task claimed again reads the same text: the URL check and the JSON
    # parse are then done once.
    # Checked when written (domain.read_back.READ_BACK): the URL and header checks are not
    # run again on the way back.
    return HttpTarget.model_validate_json(text, context=READ_BACK)


@lru_cache(maxsize=4096)
def _notify(text: str) -> Notify:
    # A frozen value too, and most tasks of a deployment send their events to a few
    # places: a claim of tasks with `notify` then parses each distinct one once.
    return Notify.model_validate_json(text, context=READ_BACK)


def to_task(row: dict[str, Any]) -> Task:
    """A task from a row whose trigger, target and notify are JSON text (queries.py)."""
    row["trigger"] = _trigger(row["trigger"])
    row["target"] = _target(row["target"])
    if row["notify"] is not None:
        row["notify"] = _notify(row["notify"])
    return Task.model_validate(row)


def to_run(row: dict[str, Any]) -> Run:
    return Run.model_validate(row)


def to_version(row: dict[str, Any]) -> TaskVersion:
    return TaskVersion.model_validate(row)
