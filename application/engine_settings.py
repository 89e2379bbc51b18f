"""How one trigger loop behaves: its name, its batch and concurrency limits, its timings."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from datetime import timedelta


def default_replica() -> str:
    """The name a replica records on its runs: "host:pid"."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """Settings of a `TriggerLoop`.

    Durations given as `timedelta` are measured on the engine's `Clock` (schedule time,
    which a test's fake clock controls); those given as seconds (`float`) are real time
    spent in this process (draining, backing off from a store outage).

    Attributes:
        replica: the name recorded on every run this engine claims.
        batch_size: the most runs one claim transaction takes.
        max_poll_interval: the longest the loop sleeps without looking at the store,
            which bounds the delay a lost notification can cause.
        max_concurrent_runs: this process's ceiling on runs in flight; the loop never
            claims more than its free slots.
        drain_timeout: seconds `stop()` lets in-flight runs finish before cancelling them.
        record_grace: seconds `stop()` then waits for cancelled runs to be recorded.
        record_batch_size: the most outcomes one `finish_runs` transaction records.
        record_delay: seconds an outcome may wait for others to share its transaction.
        lost_run_sweep_interval: how often runs whose lease expired are marked failed,
            and transactions stalled longer than `stalled_transaction_timeout` ended.
        stalled_transaction_timeout: how long a transaction of this scheduler may stay
            open before the sweep ends it (a replica stopped while it held locks);
            zero: never.
        run_retention: runs scheduled longer ago than this are deleted.
        retention_sweep_interval: how often the retention sweep runs.
        retention_batch_size: runs deleted per statement by the retention sweep.
        retention_max_batches: statements per sweep, so a backlog never holds up claims.
        store_retry_initial: seconds before the first retry after a store error.
        store_retry_max: the cap of the doubling retry backoff.
        pass_stall: seconds a pass over the store may take before the engine reports
            itself stalled (readiness): a pass takes milliseconds, unless a statement
            waits on a lock or a database that stopped answering.
    """

    replica: str = field(default_factory=default_replica)
    batch_size: int = 100
    max_poll_interval: timedelta = timedelta(seconds=5)
    max_concurrent_runs: int = 100
    drain_timeout: float = 30.0
    record_grace: float = 10.0
    record_batch_size: int = 100
    record_delay: float = 0.005
    lost_run_sweep_interval: timedelta = timedelta(seconds=15)
    stalled_transaction_timeout: timedelta = timedelta(seconds=30)
    run_retention: timedelta = timedelta(days=30)
    retention_sweep_interval: timedelta = timedelta(hours=1)
    retention_batch_size: int = 1000
    retention_max_batches: int = 10
    store_retry_initial: float = 0.5
    store_retry_max: float = 5.0
    pass_stall: float = 30.0

    def __post_init__(self) -> None:
        for name in (
            "batch_size",
            "max_concurrent_runs",
            "retention_batch_size",
            "record_batch_size",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.retention_max_batches < 1:
            raise ValueError("retention_max_batches must be at least 1")
        for name in ("max_poll_interval", "lost_run_sweep_interval", "retention_sweep_interval"):
            if getattr(self, name) <= timedelta(0):
                raise ValueError(f"{name} must be positive")
        if self.stalled_transaction_timeout < timedelta(0):
            raise ValueError("stalled_transaction_timeout must not be negative")
        if self.run_retention <= timedelta(0):
            raise ValueError("run_retention must be positive")
        if self.drain_timeout < 0 or self.record_grace < 0 or self.record_delay < 0:
            raise ValueError("drain_timeout, record_grace and record_delay must not be negative")
        if not 0 < self.store_retry_initial <= self.store_retry_max:
            raise ValueError("store retry backoff must satisfy 0 < initial <= max")
