"""What a trigger loop reports as it works, for metrics. The default observes nothing."""

from __future__ import annotations

from typing import Protocol

from domain.runs import ClaimedRun, Run


class EngineObserver(Protocol):
    """Hooks a trigger loop calls; each must return at once and never raise."""

    def claim_batch(self, count: int, seconds: float) -> None:
        """A claim transaction returned `count` runs after `seconds` (real time)."""
        ...

    def run_started(self, claimed_run: ClaimedRun, lateness_seconds: float) -> None:
        """The target of `claimed_run` is being called, this late against its
        (jittered) scheduled instant."""
        ...

    def run_finished(self, run: Run, duration_seconds: float) -> None:
        """`run` reached a final status: recorded by this engine after its call, claimed
        as MISSED or SKIPPED (duration 0), or swept as lost (duration 0)."""
        ...

    def store_error(self, exc: BaseException) -> None:
        """A store call failed; the engine retries it."""
        ...

    def in_flight(self, n: int) -> None:
        """This engine now has `n` runs in flight."""
        ...


class NoopObserver:
    def claim_batch(self, count: int, seconds: float) -> None:
        return None

    def run_started(self, claimed_run: ClaimedRun, lateness_seconds: float) -> None:
        return None

    def run_finished(self, run: Run, duration_seconds: float) -> None:
        return None

    def store_error(self, exc: BaseException) -> None:
        return None

    def in_flight(self, n: int) -> None:
        return None
