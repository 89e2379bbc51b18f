"""Tasks and runs built with the real domain models, for the HTTP executor's tests."""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from adapters.http import HttpExecutor
from domain.read_back import READ_BACK
from domain.runs import Run, RunOutcome, RunStatus
from domain.tasks import HttpTarget, Task
from domain.triggers import IntervalTrigger
from tests.fixtures.tasks import make_task

T0 = datetime(2026, 3, 9, 6, 30, tzinfo=UTC)
FAST_RETRY = {"max_attempts": 3, "backoff_seconds": 0.01, "max_backoff_seconds": 0.05}


def http_task(url: str, *, tags: list[str] | None = None, **target: Any) -> Task:
    """The executor's subject: a task named nightly-report calling `url`, its target
    fields given in their JSON form (`target`), due at T0."""
    return make_task(
        IntervalTrigger(every=60, start_at=datetime(2026, 1, 1, tzinfo=UTC)),
        now=T0,
        target=HttpTarget.model_validate({"url": url, **target}),
        name="nightly-report",
        tags=tags or [],
    )


def stored_http_task(url: str, **target: Any) -> Task:
    """As http_task, its target read back as stored: a task kept from before a rule
    refused what it holds (a literal Authorization header)."""
    return make_task(
        IntervalTrigger(every=60, start_at=datetime(2026, 1, 1, tzinfo=UTC)),
        now=T0,
        target=HttpTarget.model_validate({"url": url, **target}, context=READ_BACK),
        name="nightly-report",
    )


def make_run(task: Task, *, manual: bool = False, scheduled_for: datetime = T0) -> Run:
    return Run(
        id=uuid4(),
        task_id=task.id,
        scheduled_for=scheduled_for,
        claimed_at=scheduled_for,
        status=RunStatus.RUNNING,
        manual=manual,
        replica="test:1",
    )


async def call(executor: HttpExecutor, url: str, times: int = 1, **target: Any) -> list[RunOutcome]:
    """Run `http_task(url, **target)` `times` times, one run after the other: each
    outcome."""
    task = http_task(url, **target)
    return [await executor.execute(task, make_run(task), None) for _ in range(times)]


async def call_once(executor: HttpExecutor, url: str, **target: Any) -> RunOutcome:
    """One run of `http_task(url, **target)`: its outcome."""
    (outcome,) = await call(executor, url, **target)
    return outcome


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class FakeResolver:
    """DNS as a table: names map to address lists; others fail like getaddrinfo."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.table[host]
