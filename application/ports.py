"""The ports the application drives. Adapters fill them; docstrings are the contract.

The storage ports and their values have modules of their own (`store_ports`,
`store_values`), as has the engines' `EngineObserver` (`observer`); they are named here
too, so that every port is imported from one place.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict, JsonValue

from application.engine_settings import EngineSettings
from application.observer import EngineObserver
from application.store_ports import EventStore, TaskHold, TaskStore
from application.store_values import (
    EventPageKey,
    Freed,
    HoldScope,
    RunFilter,
    RunPageKey,
    TaskDelete,
    TaskFilter,
    TaskKept,
    TaskPageKey,
    TaskUpdate,
)
from domain.runs import ClaimedRun, Run, RunOutcome
from domain.tasks import HttpTarget, Notify, Task

__all__ = [
    "CallProgress",
    "Clock",
    "Engine",
    "EngineObserver",
    "EngineTestHooks",
    "EventPageKey",
    "EventStore",
    "Executor",
    "Freed",
    "HoldScope",
    "RenderedRequest",
    "RunDispatcher",
    "RunFilter",
    "RunPageKey",
    "TaskDelete",
    "TaskFilter",
    "TaskHold",
    "TaskKept",
    "TaskPageKey",
    "TaskStore",
    "TaskUpdate",
    "Waker",
]


class Waker(Protocol):
    """Wakes sleeping engines when tasks change or a cancel is requested."""

    async def start(self) -> None:
        """Begin listening. Idempotent."""
        ...

    async def wait(self) -> None:
        """Return once a notification arrived since the last `wait` returned (at once if
        one is pending). Lost notifications cost latency only: callers bound the wait."""
        ...

    async def notify(self) -> None:
        """Wake every engine that shares the store."""
        ...

    async def close(self) -> None: ...


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, aware, UTC."""
        ...

    async def sleep_until(self, instant: datetime) -> None:
        """Return at `instant` (at once when it has passed)."""
        ...


class RenderedRequest(BaseModel):
    """The request a run sends (dry run: with every secret replaced by "***")."""

    model_config = ConfigDict(frozen=True)

    method: str
    url: str
    headers: dict[str, str]
    body: JsonValue = None


class CallProgress:
    """What a run's call has done so far, reported by its executor as it goes: the engine
    passes one to `Executor.execute` and reads it when it stops the call (a cancel, the
    drain timeout, the lease's budget), so that the run it records says what was made.

    `attempts` counts the attempts begun so far, each from before its request can reach
    the target (docs/api.md, "Run": every attempt whose request has started to be sent
    is in it); `http_status` and `response_excerpt` are those of the last attempt that
    ended (None for one that ended without an answer, or before any ended). The engine
    makes one per run; an executor only writes to it."""

    __slots__ = ("attempts", "http_status", "response_excerpt")

    def __init__(self) -> None:
        self.attempts = 0
        self.http_status: int | None = None
        self.response_excerpt: str | None = None


class Executor(Protocol):
    """Performs runs: one call of a task's target, with its retries, per run."""

    def check(self, target: HttpTarget, notify: Notify | None = None) -> None:
        """Reject at create a target that can never run: a template that does not parse,
        a literal address the outbound guard denies (also for `notify.url` and its
        token URL). Raises InvalidRequest naming the field (e.g. "target.url")."""
        ...

    async def execute(
        self,
        task: Task,
        run: Run,
        last_run_at: datetime | None,
        progress: CallProgress | None = None,
    ) -> RunOutcome:
        """Call the target and report how the run ended (SUCCEEDED or FAILED, with the
        attempts, HTTP status, a response excerpt and an error). Never raises for a
        failed call; cancellation propagates as asyncio.CancelledError.

        With `progress`, report into it while the call goes on: count each attempt in
        `attempts` as it begins (before anything of it is sent), and set `http_status`
        and `response_excerpt` as each attempt ends; what it holds when a cancel arrives
        is what the run made until then. The outcome's `attempts` equals
        `progress.attempts` at return."""
        ...

    async def render(
        self, task: Task, run: Run, last_run_at: datetime | None, *, redact: bool
    ) -> RenderedRequest:
        """The request `execute` would send first, with secrets as "***" when `redact`."""
        ...

    async def close(self) -> None: ...


class Engine(Protocol):
    """What runs the schedule. The native trigger loop and the APScheduler adapter both
    fill this port, so swapping engines is one configuration change."""

    async def start(self) -> None:
        """Start firing tasks in the background. Returns at once."""
        ...

    async def stop(self) -> None:
        """Stop claiming, let in-flight runs finish up to the drain timeout, cancel the
        rest (recorded FAILED), and return when nothing is left running."""
        ...

    @property
    def alive(self) -> bool:
        """True while the engine is running and its loop is healthy (readiness)."""
        ...

    @property
    def stalled_for(self) -> float | None:
        """Seconds its pass over the store under way has taken, when far longer than a
        pass takes (a statement waiting on a lock, or on a database that stopped
        answering); None otherwise (readiness)."""
        ...


class RunDispatcher(Protocol):
    """Runs, on this process, a run claimed outside the schedule (fire now)."""

    def dispatch(self, claimed: ClaimedRun) -> None:
        """Call the target of `claimed` in the background and record the outcome,
        under this process's ceiling on concurrent runs; a run that is not to be called
        (`should_call` false: recorded SKIPPED already) is only reported to the engine's
        observer. Returns at once."""
        ...

    def busy(self) -> str | None:
        """Why a run dispatched now would wait for its call (every one of this process's
        call slots is taken), or None when it would start at once."""
        ...


class EngineTestHooks(Engine, RunDispatcher, Protocol):
    """The test protocol both engines fill (`TriggerLoop`, the APScheduler adapter):
    what the engine contract suite drives beyond the ports. Production code never calls
    `kill`; the rest is read-only state a test waits on."""

    @property
    def settings(self) -> EngineSettings: ...

    @property
    def in_flight(self) -> int:
        """Runs whose call this engine has started and not yet recorded."""
        ...

    @property
    def last_pass_at(self) -> datetime | None:
        """When the engine last finished a claim pass (its clock), None before the first."""
        ...

    async def kill(self) -> None:
        """Die as a killed process would: stop the loop and every call at once, record
        nothing; the runs' leases stay until they expire (the lost-run sweep's case)."""
        ...
