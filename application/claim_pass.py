"""The claim pass both engines drive, and the outage retry they both loop with.

A claim pass claims due runs in batches while they come back full and slots are free,
and hands each claimed run to the `RunRunner`. The native `TriggerLoop` runs one pass
per tick; the APScheduler engine runs one when a schedule fires. Batch sizing, the
per-batch log line and the observer's figures are this module's, so the two engines
cannot drift apart. docs/engine.md tells the whole story.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from application.engine_runs import RunRunner
from application.engine_settings import EngineSettings
from application.observer import EngineObserver
from application.ports import Clock, TaskStore, Waker
from domain.runs import ClaimedRun, RunStatus


def claim_chunk(settings: EngineSettings) -> int:
    """The most runs one claim takes: `batch_size`, and at most half the ceiling, so
    that while one half of a saturated engine's runs is being recorded, the other half
    is claimed and called."""
    return max(1, min(settings.batch_size, settings.max_concurrent_runs // 2))


# Claims of one pass under way at once, once a claim came back full. Two let this
# process turn one claim's rows into runs while PostgreSQL reads and writes the next;
# a third only waits for this process's CPU (bench/claim.py, docs/engine.md).
CLAIMS_IN_FLIGHT = 2


@dataclass(slots=True)
class _PassState:
    """What one claim pass has learned so far."""

    more: bool = True  # the last claim to land came back full (or none has landed)
    backlog: bool = False  # a claim of this pass came back full
    starved: bool = False  # more may be due, and no slot is free for a claim
    claimed_at: datetime | None = None  # the instant of the last claim that was not full
    failure: BaseException | None = None  # the first claim that failed


class ClaimPass:
    """Claims batches for one engine, under its ceiling."""

    def __init__(
        self,
        store: TaskStore,
        clock: Clock,
        settings: EngineSettings,
        observer: EngineObserver,
        runs: RunRunner,
        log: logging.Logger,
    ) -> None:
        self._store = store
        self._clock = clock
        self._settings = settings
        self._observer = observer
        self._runs = runs
        self._log = log
        self.chunk = claim_chunk(settings)
        self.starved = False  # a pass found no free slot: a finishing run owes one
        # The last pass left runs due: no slot was free, or its last batch came back
        # full. The event sender gives way meanwhile (application/events.py).
        self.behind = False

    @property
    def free(self) -> int:
        """Slots free under the engine's ceiling."""
        return self._settings.max_concurrent_runs - len(self._runs)

    async def run(self, closed: Callable[[], bool]) -> datetime | None:
        """Claim batches while they come back full, slots are free and `closed()` is
        false. Returns the instant of the last claim, after which nothing claimable was
        left due; None when no slot was free (`starved` is then set) or none was made.

        A pass starts with one claim. Once one came back full (a backlog), it keeps
        CLAIMS_IN_FLIGHT claims under way, each on a connection of its own, as far as
        free slots allow: while one claim's rows become runs in this process, the next
        is read and written by PostgreSQL. Every claim that commits is dispatched, also
        when another one failed or the pass is cancelled."""
        flight: dict[asyncio.Task[list[ClaimedRun]], tuple[int, datetime, float]] = {}
        state = _PassState()
        try:
            while True:
                self._launch(flight, state, closed)
                if not flight:
                    if state.failure is not None:
                        raise state.failure
                    if state.starved:
                        self.starved = self.behind = True
                        return None
                    self.behind = state.more
                    return state.claimed_at
                done, _ = await asyncio.wait(flight, return_when=asyncio.FIRST_COMPLETED)
                for claim in done:
                    self._landed(claim, flight.pop(claim), state)
        except BaseException:
            # Cancelled (a stop that gave up on the store, or a kill): the claims under
            # way are cancelled; those that committed are still handed on.
            for claim in flight:
                claim.cancel()
            if flight:
                await asyncio.wait(flight)
            for claim, started in flight.items():
                if not claim.cancelled() and claim.exception() is None:
                    self._landed(claim, started, _PassState())
            raise

    def _launch(
        self,
        flight: dict[asyncio.Task[list[ClaimedRun]], tuple[int, datetime, float]],
        state: _PassState,
        closed: Callable[[], bool],
    ) -> None:
        """Start claims while this pass may: more may be due, none failed, not closed,
        fewer under way than its depth, and slots free beyond those they reserve (a
        whole chunk of them for a claim beside another)."""
        state.starved = False
        depth = CLAIMS_IN_FLIGHT if state.backlog else 1
        while state.more and state.failure is None and len(flight) < depth and not closed():
            free = self.free - sum(limit for limit, _, _ in flight.values())
            if free <= 0:
                state.starved = not flight
                return
            if flight and free < self.chunk:
                # A claim beside another takes a whole chunk or waits: the slots left
                # over would make small claims, each costing a whole transaction.
                return
            limit = min(self.chunk, free)
            claimed_at = self._clock.now()
            claim = asyncio.create_task(
                self._store.claim_due(claimed_at, limit, self._settings.replica)
            )
            flight[claim] = (limit, claimed_at, time.perf_counter())

    def _landed(
        self,
        claim: asyncio.Task[list[ClaimedRun]],
        started: tuple[int, datetime, float],
        state: _PassState,
    ) -> None:
        """Hand a finished claim's runs on, and note what it says of the backlog."""
        limit, claimed_at, began = started
        failure = claim.exception()
        if failure is not None:
            state.failure = state.failure or failure
            return
        batch = claim.result()
        seconds = time.perf_counter() - began
        self._observer.claim_batch(len(batch), seconds)
        if batch:
            self._log_batch(batch, seconds)
        for claimed in batch:
            self._runs.dispatch(claimed)
        state.more = len(batch) >= limit
        if state.more:
            state.backlog = True
        else:
            state.claimed_at = claimed_at

    def _log_batch(self, batch: list[ClaimedRun], seconds: float) -> None:
        statuses = [claimed.run.status for claimed in batch]
        self._log.info(
            "claimed %d runs",
            len(batch),
            extra={
                "replica": self._settings.replica,
                "count": len(batch),
                "running": statuses.count(RunStatus.RUNNING),
                "missed": statuses.count(RunStatus.MISSED),
                "skipped": statuses.count(RunStatus.SKIPPED),
                "queued": statuses.count(RunStatus.QUEUED),
                "seconds": round(seconds, 6),
            },
        )


async def wait_for_waker(waker: Waker, settings: EngineSettings, log: logging.Logger) -> None:
    """Until the waker reports a change. A broken waker is logged and waited out for
    `store_retry_initial`: the engine's bounded sleep covers it, without spinning."""
    try:
        await waker.wait()
    except Exception as exc:
        log.warning("waker failed: %s", exc, extra={"error": repr(exc)})
        await asyncio.sleep(settings.store_retry_initial)


async def wait_or_stop(stopped: Callable[[], Awaitable[object]], seconds: float) -> None:
    """Wait `seconds` (real time), or less when `stopped()` completes first."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopped(), seconds)


# Seconds a loop's passes may fail in a row, once one succeeded, before the engine stops
# being ready: a cut connection fails a pass and the next, a moment later, succeeds, and a
# load balancer should not take every replica out of rotation for that. A database that
# is really gone fails /readyz's own ping at once.
FAILING_GRACE = 10.0


class FailingSpell:
    """How long the passes of a loop have failed in a row (real time: what a probe sees)."""

    def __init__(self, seconds: Callable[[], float] = time.monotonic) -> None:
        self._seconds = seconds
        self.succeeded_once = False
        self._since: float | None = None

    def succeeded(self) -> None:
        self.succeeded_once = True
        self._since = None

    def failed(self) -> None:
        if self._since is None:
            self._since = self._seconds()

    def reset(self) -> None:
        self.succeeded_once = False
        self._since = None

    @property
    def failing(self) -> bool:
        """The last pass failed."""
        return self._since is not None

    @property
    def too_long(self) -> bool:
        since = self._since
        return since is not None and self._seconds() - since >= FAILING_GRACE

    @property
    def healthy(self) -> bool:
        """A pass has succeeded, and passes have not failed for FAILING_GRACE since."""
        return self.succeeded_once and not self.too_long


class PassLoop:
    """Runs an engine's passes until it stops, retrying through store outages.

    After a pass, sleep until the deadline it returned; after a failed one, report it
    through `failed(exc, retry_in)`, which waits `retry_in` seconds: `store_retry_initial`,
    doubling up to `store_retry_max`, back to the start once a pass succeeds. `healthy`
    says whether a pass succeeded and none has failed since, or not for FAILING_GRACE.
    """

    def __init__(self, settings: EngineSettings) -> None:
        self._settings = settings
        self.spell = FailingSpell()
        self._began: float | None = None  # time.monotonic() of the pass under way

    @property
    def healthy(self) -> bool:
        return self.spell.healthy

    @property
    def stalled_for(self) -> float | None:
        """Seconds the pass under way has taken, once past `pass_stall`; else None."""
        began = self._began
        if began is None:
            return None
        taken = time.monotonic() - began  # real time: a fake clock does not stall
        return taken if taken > self._settings.pass_stall else None

    async def run(
        self,
        stopping: Callable[[], bool],
        one_pass: Callable[[], Awaitable[datetime]],
        sleep_until: Callable[[datetime], Awaitable[None]],
        failed: Callable[[Exception, float], Awaitable[None]],
    ) -> None:
        settings = self._settings
        backoff = settings.store_retry_initial
        while not stopping():
            self._began = time.monotonic()
            try:
                deadline = await one_pass()
            except Exception as exc:
                self._began = None
                self.spell.failed()
                await failed(exc, backoff)
                backoff = min(backoff * 2, settings.store_retry_max)
                continue
            self._began = None
            self.spell.succeeded()
            backoff = settings.store_retry_initial
            await sleep_until(deadline)
