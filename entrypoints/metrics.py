"""Prometheus metrics: an `EngineObserver` that counts into its own registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from domain.events import EventStatus, Progress
from domain.runs import ClaimedRun, Run, RunStatus
from domain.tasks import EventType

LATENESS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600)
# An attempt's outcome, by the status it left its event in.
_EVENT_OUTCOMES = {
    EventStatus.SENT: "sent",
    EventStatus.PENDING: "retried",
    EventStatus.DROPPED: "dropped",
}
CLAIM_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class PrometheusObserver:
    """Fills the engine's `EngineObserver` port (and the event sender's
    `EventObserver`) with Prometheus metrics.

    Each instance owns a `CollectorRegistry`, so two apps in one process (tests) never
    share or collide on a metric.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._runs = Counter(
            "scheduler_runs",
            "Runs that reached a final status, by status.",
            ["status"],
            registry=self.registry,
        )
        for status in RunStatus:
            if status.finished:
                self._runs.labels(status=status.value)
        self._claimed = Counter(
            "scheduler_claimed_runs", "Runs claimed by this process.", registry=self.registry
        )
        self._lateness = Histogram(
            "scheduler_fire_lateness_seconds",
            "How late a run's call started against its (jittered) scheduled instant.",
            buckets=LATENESS_BUCKETS,
            registry=self.registry,
        )
        self._claim_duration = Histogram(
            "scheduler_claim_batch_duration_seconds",
            "Duration of one claim transaction.",
            buckets=CLAIM_BUCKETS,
            registry=self.registry,
        )
        self._run_duration = Histogram(
            "scheduler_run_duration_seconds",
            "Duration of a run from its first call to its recorded outcome.",
            registry=self.registry,
        )
        self._in_flight = Gauge(
            "scheduler_runs_in_flight", "Runs this process is calling now.", registry=self.registry
        )
        self._store_errors = Counter(
            "scheduler_store_errors",
            "Store calls that failed, by error type.",
            ["error"],
            registry=self.registry,
        )

        self._events = Counter(
            "scheduler_events",
            "Event delivery attempts, by event type and outcome (sent, retried, dropped).",
            ["type", "outcome"],
            registry=self.registry,
        )
        for event_type in EventType:
            for outcome in _EVENT_OUTCOMES.values():
                self._events.labels(type=event_type.value, outcome=outcome)
        self._events_dropped = Counter(
            "scheduler_events_dropped",
            "Events given up on: not delivered within their window (a day).",
            registry=self.registry,
        )
        self._events_pending = Gauge(
            "scheduler_events_pending",
            "Events waiting to be delivered (all replicas), as this process last counted.",
            registry=self.registry,
        )

    # -- EngineObserver ---------------------------------------------------------

    def claim_batch(self, count: int, seconds: float) -> None:
        self._claimed.inc(count)
        self._claim_duration.observe(seconds)

    def run_started(self, claimed_run: ClaimedRun, lateness_seconds: float) -> None:
        self._lateness.observe(max(0.0, lateness_seconds))

    def run_finished(self, run: Run, duration_seconds: float) -> None:
        self._runs.labels(status=run.status.value).inc()
        called = run.status in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)
        if called and run.attempts > 0:  # not a run failed before its call (a secret unset)
            self._run_duration.observe(duration_seconds)

    def store_error(self, exc: BaseException) -> None:
        self._store_errors.labels(error=type(exc).__name__).inc()

    def in_flight(self, n: int) -> None:
        self._in_flight.set(n)

    # -- EventObserver -----------------------------------------------------------

    def event_settled(self, event: Progress) -> None:
        self._events.labels(type=event.type.value, outcome=_EVENT_OUTCOMES[event.status]).inc()
        if event.status is EventStatus.DROPPED:
            self._events_dropped.inc()

    def events_pending(self, n: int) -> None:
        self._events_pending.set(n)

    # -- exposition ---------------------------------------------------------------

    def exposition(self) -> bytes:
        """The registry in Prometheus text format."""
        return generate_latest(self.registry)
