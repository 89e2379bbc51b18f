"""An executor that calls nothing: every run succeeds at once (benchmarks, dry local runs)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from importlib import metadata

from adapters.clock import SystemClock
from application.ports import CallProgress, Clock, RenderedRequest
from domain.runs import Run, RunOutcome, RunStatus, idempotency_key
from domain.tasks import HttpTarget, NoAuth, Notify, Task

REDACTED = "***"


def _user_agent() -> str:
    try:
        return f"imbi-scheduler/{metadata.version('imbi-scheduler')}"
    except metadata.PackageNotFoundError:
        return "imbi-scheduler/dev"


class NoopExecutor:
    """Succeeds every run at once without any I/O. `render` gives the request's shape
    with the scheduler's headers; it never reads a secret, so an authorization header
    is always "***". Its one pretended attempt is counted in `progress` as it begins,
    as a real one is: a run cancelled at its cancel point made 1 attempt."""

    def __init__(self, clock: Clock | None = None, *, user_agent: str | None = None) -> None:
        self._clock = clock or SystemClock()
        self._user_agent = user_agent or _user_agent()
        self.executed = 0

    def check(self, target: HttpTarget, notify: Notify | None = None) -> None:
        return None

    async def execute(
        self,
        task: Task,
        run: Run,
        last_run_at: datetime | None,
        progress: CallProgress | None = None,
    ) -> RunOutcome:
        started = self._clock.now()
        if progress is not None:
            progress.attempts += 1
        await asyncio.sleep(0)  # a cancel point, as any real call has
        self.executed += 1
        if progress is not None:
            progress.http_status = 200
        return RunOutcome(
            status=RunStatus.SUCCEEDED,
            attempts=1,
            http_status=200,
            started_at=started,
            finished_at=self._clock.now(),
        )

    async def render(
        self, task: Task, run: Run, last_run_at: datetime | None, *, redact: bool
    ) -> RenderedRequest:
        target = task.target
        scheduled = run.scheduled_for.astimezone(timezone.utc)
        headers = dict(target.headers)
        if not isinstance(target.auth, NoAuth):
            headers["Authorization"] = REDACTED
        headers |= {
            "Idempotency-Key": idempotency_key(run),
            "X-Scheduler-Task-Id": str(task.id),
            "X-Scheduler-Run-Id": str(run.id),
            "X-Scheduler-Scheduled-For": scheduled.isoformat().replace("+00:00", "Z"),
            "User-Agent": self._user_agent,
        }
        return RenderedRequest(
            method=target.method, url=target.url, headers=headers, body=target.body
        )

    async def close(self) -> None:
        return None
