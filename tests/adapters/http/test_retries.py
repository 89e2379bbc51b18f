"""Retries per `target.retry`: what is retried, the waits, and one key for all attempts."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta, timezone

import pytest

from adapters.http import HttpExecutor
from adapters.http.failures import retry_after_seconds
from application.ports import CallProgress
from domain.runs import RunStatus
from tests.adapters.http.builders import FAST_RETRY, closed_port, http_task, make_run
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually


async def test_retries_a_503_with_the_same_key(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", Response(503), Response(200, b"done"))
    task = http_task(recording_target.url("/"), retry=FAST_RETRY)
    run = make_run(task)

    outcome = await executor.execute(task, run, None)

    assert outcome.status is RunStatus.SUCCEEDED
    assert (outcome.attempts, outcome.http_status, outcome.error) == (2, 200, None)
    first, second = recording_target.received()
    for name in ("Idempotency-Key", "X-Scheduler-Run-Id"):
        assert first.header(name) == second.header(name) is not None
    assert second.header("X-Scheduler-Run-Id") == str(run.id)


async def test_gives_up_after_max_attempts(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", Response(503, b"busy"))
    task = http_task(recording_target.url("/"), retry=FAST_RETRY)

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.FAILED
    assert outcome.attempts == 3
    assert outcome.http_status == 503
    assert outcome.error == "HTTP 503 Service Unavailable (after 3 attempts)"
    assert len(recording_target.received()) == 3


@pytest.mark.parametrize("status", [400, 401, 404, 409, 422])
async def test_no_retry_on_a_client_error(
    executor: HttpExecutor, recording_target: RecordingTarget, status: int
) -> None:
    recording_target.respond("/", Response(status), Response(200))
    task = http_task(recording_target.url("/"), retry=FAST_RETRY)

    outcome = await executor.execute(task, make_run(task), None)

    assert (outcome.status, outcome.attempts, outcome.http_status) == (
        RunStatus.FAILED,
        1,
        status,
    )
    assert len(recording_target.received()) == 1


async def test_retries_a_429(executor: HttpExecutor, recording_target: RecordingTarget) -> None:
    recording_target.respond("/", Response(429), Response(200))
    task = http_task(recording_target.url("/"), retry=FAST_RETRY)

    outcome = await executor.execute(task, make_run(task), None)

    assert (outcome.status, outcome.attempts) == (RunStatus.SUCCEEDED, 2)


async def test_retries_a_timeout(executor: HttpExecutor, recording_target: RecordingTarget) -> None:
    recording_target.respond("/", Response(delay=5), Response(200))
    task = http_task(recording_target.url("/"), timeout_seconds=0.3, retry=FAST_RETRY)

    outcome = await executor.execute(task, make_run(task), None)

    assert (outcome.status, outcome.attempts) == (RunStatus.SUCCEEDED, 2)


async def test_retries_a_refused_connection(executor: HttpExecutor) -> None:
    port = closed_port()
    task = http_task(f"http://127.0.0.1:{port}/", retry=FAST_RETRY)

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.attempts == 3
    assert outcome.error == f"connection refused by 127.0.0.1:{port} (after 3 attempts)"


def retry_waits(caplog: pytest.LogCaptureFixture) -> list[float]:
    """The waits before retries, as the executor logged them ("retrying in %gs") and
    then slept them."""
    waits: list[float] = []
    for record in caplog.records:
        wait = record.args[-1] if isinstance(record.args, tuple) and record.args else None
        if str(record.msg).endswith("retrying in %gs") and isinstance(wait, int | float):
            waits.append(float(wait))
    return waits


async def test_retry_after_overrides_the_backoff(
    executor: HttpExecutor, recording_target: RecordingTarget, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="scheduler.http")
    recording_target.respond("/", Response(503, headers={"Retry-After": "0"}), Response(200))
    retry = {"max_attempts": 2, "backoff_seconds": 30, "max_backoff_seconds": 60}
    task = http_task(recording_target.url("/"), retry=retry)

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.SUCCEEDED
    assert retry_waits(caplog) == [0.0]  # not the 30 s backoff


async def test_retry_after_is_capped_by_max_backoff(
    executor: HttpExecutor, recording_target: RecordingTarget, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="scheduler.http")
    recording_target.respond("/", Response(429, headers={"Retry-After": "3600"}), Response(200))
    retry = {"max_attempts": 2, "backoff_seconds": 0.01, "max_backoff_seconds": 0.3}
    task = http_task(recording_target.url("/"), retry=retry)

    outcome = await executor.execute(task, make_run(task), None)

    first, second = recording_target.received()
    assert outcome.status is RunStatus.SUCCEEDED
    assert retry_waits(caplog) == [0.3]  # not the hour the target asked for
    assert second.received_at - first.received_at >= 0.25  # and it did wait


async def test_backoff_doubles_between_attempts(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", Response(500))
    retry = {"max_attempts": 3, "backoff_seconds": 0.1, "max_backoff_seconds": 1}
    task = http_task(recording_target.url("/"), retry=retry)

    await executor.execute(task, make_run(task), None)

    first, second, third = (r.received_at for r in recording_target.received())
    assert second - first >= 0.09
    assert third - second >= 0.19


async def test_a_cancel_during_an_attempt_leaves_it_counted_with_the_answer_before(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", Response(500, b"busy"), Response(delay=60))
    task = http_task(recording_target.url("/"), retry=FAST_RETRY, timeout_seconds=60)
    progress = CallProgress()
    call = asyncio.create_task(executor.execute(task, make_run(task), None, progress))

    async def second_attempt() -> bool:
        return len(recording_target.received()) == 2

    await eventually(second_attempt, "the second attempt")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert (progress.attempts, progress.http_status, progress.response_excerpt) == (
        2,
        500,
        "busy",
    )


async def test_a_cancel_during_a_retry_wait_leaves_the_attempt_before_it(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", Response(503, b"later"))
    retry = {"max_attempts": 2, "backoff_seconds": 30, "max_backoff_seconds": 60}
    task = http_task(recording_target.url("/"), retry=retry)
    progress = CallProgress()
    call = asyncio.create_task(executor.execute(task, make_run(task), None, progress))

    async def answered() -> bool:  # set as the attempt ends, before the wait
        return progress.http_status is not None

    await eventually(answered, "the first answer")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert (progress.attempts, progress.http_status, progress.response_excerpt) == (
        1,
        503,
        "later",
    )
    assert len(recording_target.received()) == 1


async def test_the_outcome_counts_what_the_progress_counted(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", Response(503), Response(200, b"done"))
    task = http_task(recording_target.url("/"), retry=FAST_RETRY)
    progress = CallProgress()
    outcome = await executor.execute(task, make_run(task), None, progress)
    assert (outcome.attempts, outcome.http_status, outcome.response_excerpt) == (2, 200, "done")
    assert (progress.attempts, progress.http_status, progress.response_excerpt) == (
        2,
        200,
        "done",
    )


NOW = datetime(2026, 3, 9, 6, 30, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(None, None, id="absent"),
        pytest.param("120", 120.0, id="seconds"),
        pytest.param(" 0 ", 0.0, id="zero"),
        pytest.param("Mon, 09 Mar 2026 06:31:00 GMT", 60.0, id="http-date"),
        pytest.param("Mon, 09 Mar 2026 06:00:00 GMT", 0.0, id="http-date-past"),
        pytest.param("-5", None, id="negative"),
        pytest.param("soon", None, id="garbage"),
    ],
)
def test_retry_after_seconds(value: str | None, expected: float | None) -> None:
    assert retry_after_seconds(value, NOW) == expected


def test_retry_after_http_date_defaults_to_now() -> None:
    later = datetime.now(timezone.utc) + timedelta(seconds=100)
    seconds = retry_after_seconds(later.strftime("%a, %d %b %Y %H:%M:%S GMT"))
    assert seconds is not None and 95 <= seconds <= 100
