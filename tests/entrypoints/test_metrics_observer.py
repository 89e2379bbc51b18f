"""The Prometheus observer's figures mean what docs/operations.md says ("Metrics")."""

from __future__ import annotations

from prometheus_client import generate_latest

from domain.runs import RunStatus
from entrypoints.metrics import PrometheusObserver
from tests.adapters.http.builders import http_task, make_run


def duration_count(observer: PrometheusObserver) -> float:
    for line in generate_latest(observer.registry).decode().splitlines():
        if line.startswith("scheduler_run_duration_seconds_count"):
            return float(line.split()[-1])
    raise AssertionError("no scheduler_run_duration_seconds_count")


def test_run_duration_counts_only_runs_that_made_a_call() -> None:
    # "first call to recorded outcome, for runs that made a call": a run that failed
    # before its call (a secret not set, a template that did not render) made none.
    observer = PrometheusObserver()
    task = http_task("http://reports.test/")
    run = make_run(task)

    observer.run_finished(run.model_copy(update={"status": RunStatus.FAILED}), 0.001)
    assert duration_count(observer) == 0

    called = run.model_copy(update={"status": RunStatus.FAILED, "attempts": 1})
    observer.run_finished(called, 0.2)
    assert duration_count(observer) == 1
