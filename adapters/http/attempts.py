"""One attempt of a call as the executor saw it, and its log lines: a success at DEBUG
(the engine logs every run's outcome at INFO already), anything else louder."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from domain.runs import Run
from domain.tasks import Task

logger = logging.getLogger("scheduler.http")


@dataclass(frozen=True, slots=True)
class CallResult:
    """How one call ended: an answer (`status`) or an error."""

    status: int | None = None
    excerpt: str | None = None
    error: str | None = None
    retryable: bool = False
    retry_after: float | None = None

    @property
    def succeeded(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def log_result(task: Task, run: Run, attempt: int, result: CallResult, seconds: float) -> None:
    level = logging.DEBUG if result.succeeded else logging.WARNING
    if not logger.isEnabledFor(level):
        return
    what = f"HTTP {result.status}" if result.status is not None else result.error
    logger.log(
        level,
        "task %s run %s attempt %d: %s in %.0f ms",
        task.id,
        run.id,
        attempt,
        what,
        seconds * 1000,
        extra=_fields(task, run, attempt, http_status=result.status, duration=seconds),
    )


def log_attempt(task: Task, run: Run, attempt: int, level: int, message: str, *args: Any) -> None:
    if not logger.isEnabledFor(level):
        return
    logger.log(
        level,
        "task %s run %s attempt %d: " + message,
        task.id,
        run.id,
        attempt,
        *args,
        extra=_fields(task, run, attempt),
    )


def _fields(task: Task, run: Run, attempt: int, **more: Any) -> dict[str, Any]:
    return {"task_id": str(task.id), "run_id": str(run.id), "attempt": attempt, **more}
