"""One call: method, headers, body, the outcome, and the clear errors of failed calls."""

from __future__ import annotations

import asyncio
import logging
import time

import httpx
import pytest
from pydantic import JsonValue

from adapters.http import HttpExecutor, HttpExecutorSettings
from adapters.http.requests import PreparedRequest, build_request
from domain.runs import RunStatus
from tests.adapters.http.builders import (
    FAST_RETRY,
    T0,
    FakeResolver,
    call_once,
    closed_port,
    http_task,
    make_run,
)
from tests.adapters.http.conftest import MakeExecutor
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually


async def test_sends_method_headers_and_json_body(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/run", Response(201, b'{"accepted": true}'))
    task = http_task(
        recording_target.url("/run"),
        method="PUT",
        headers={"X-Team": "data"},
        body={"any": "json", "n": [1, 2]},
    )

    outcome = await executor.execute(task, make_run(task), None)

    [request] = recording_target.received("/run")
    assert request.method == "PUT"
    assert request.header("X-Team") == "data"
    assert request.header("Content-Type") == "application/json"
    assert request.json() == {"any": "json", "n": [1, 2]}
    assert outcome.status is RunStatus.SUCCEEDED
    assert outcome.http_status == 201
    assert outcome.attempts == 1
    assert outcome.response_excerpt == '{"accepted": true}'
    assert outcome.error is None
    assert outcome.started_at is not None and outcome.started_at.tzinfo is not None
    assert outcome.started_at <= outcome.finished_at


async def test_outbound_headers_of_a_scheduled_run(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    task = http_task(recording_target.url("/"))
    run = make_run(task)

    await executor.execute(task, run, None)

    [request] = recording_target.received()
    assert request.header("Idempotency-Key") == f"{task.id}:{int(T0.timestamp())}"
    assert request.header("X-Scheduler-Task-Id") == str(task.id)
    assert request.header("X-Scheduler-Run-Id") == str(run.id)
    assert request.header("X-Scheduler-Scheduled-For") == "2026-03-09T06:30:00Z"
    assert request.header("User-Agent") == "imbi-scheduler/0.1.0"


async def test_a_manual_run_keys_by_run_id(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    task = http_task(recording_target.url("/"))
    run = make_run(task, manual=True)

    await executor.execute(task, run, None)

    [request] = recording_target.received()
    assert request.header("Idempotency-Key") == f"{task.id}:{run.id}"


async def test_no_body_when_body_is_null(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    task = http_task(recording_target.url("/"), method="GET")

    await executor.execute(task, make_run(task), None)

    [request] = recording_target.received()
    assert request.method == "GET"
    assert request.body == b""
    assert request.header("Content-Type") is None


async def test_user_agent_from_settings(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    executor = make_executor(HttpExecutorSettings(user_agent="custom/1"))
    task = http_task(recording_target.url("/"))

    await executor.execute(task, make_run(task), None)

    assert recording_target.received()[0].header("User-Agent") == "custom/1"


async def test_a_non_2xx_answer_fails(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", Response(404, b"no such thing"))

    outcome = await call_once(executor, recording_target.url("/"))

    assert outcome.status is RunStatus.FAILED
    assert outcome.http_status == 404
    assert outcome.error == "HTTP 404 Not Found"
    assert outcome.response_excerpt == "no such thing"


async def test_a_redirect_is_an_answer_not_followed(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", Response(302, b"", {"Location": "/elsewhere"}))

    outcome = await call_once(executor, recording_target.url("/"))

    assert (outcome.status, outcome.http_status) == (RunStatus.FAILED, 302)
    assert recording_target.received("/elsewhere") == []


async def test_a_hanging_target_times_out(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", Response(delay=10))
    task = http_task(recording_target.url("/"), timeout_seconds=0.3)

    started = time.monotonic()
    outcome = await executor.execute(task, make_run(task), None)

    assert time.monotonic() - started < 2
    assert outcome.status is RunStatus.FAILED
    assert outcome.error == "timed out after 0.3s"
    assert outcome.http_status is None
    assert outcome.attempts == 1


async def test_an_answer_that_came_while_the_process_was_frozen_is_read(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    """A process frozen past the call's timeout (a stopped process, a paused VM) wakes
    with the answer already in the socket: the call reads it rather than time out (from
    a fault audit, where calls answered 200 during a SIGSTOP read as stopped)."""
    recording_target.respond("/", Response(200, b"ok", delay=0.3))
    task = http_task(recording_target.url("/"), timeout_seconds=1)
    loop = asyncio.get_running_loop()

    def freeze_once_called() -> None:
        if not recording_target.received("/"):
            loop.call_later(0.01, freeze_once_called)
            return
        time.sleep(1.5)  # the loop stops past the limit; the target answers at 0.3 s

    loop.call_soon(freeze_once_called)
    outcome = await executor.execute(task, make_run(task), None)

    assert (outcome.status, outcome.http_status) == (RunStatus.SUCCEEDED, 200)
    assert len(recording_target.received("/")) == 1


async def test_a_refused_connection(executor: HttpExecutor) -> None:
    port = closed_port()

    outcome = await call_once(executor, f"http://127.0.0.1:{port}/")

    assert outcome.status is RunStatus.FAILED
    assert outcome.error == f"connection refused by 127.0.0.1:{port}"


async def test_a_tls_error(executor: HttpExecutor, recording_target: RecordingTarget) -> None:
    # The recording target speaks plain HTTP, so the TLS handshake fails.
    outcome = await call_once(executor, recording_target.url("/").replace("http://", "https://"))

    assert outcome.status is RunStatus.FAILED
    assert outcome.error is not None
    assert outcome.error.startswith("TLS error connecting to 127.0.0.1:")


async def test_a_dns_failure(make_executor: MakeExecutor) -> None:
    executor = make_executor(resolver=FakeResolver({}))

    outcome = await call_once(executor, "http://nowhere.test/")

    assert outcome.status is RunStatus.FAILED
    assert outcome.error == "DNS lookup of 'nowhere.test' failed: Name or service not known"


async def test_connects_to_the_address_the_guard_checked(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    # "target.test" exists only in the injected resolver: the call arrives because the
    # transport connects to the resolved, checked address, keeping the original Host.
    resolver = FakeResolver({"target.test": ["127.0.0.1"]})
    executor = make_executor(resolver=resolver)
    port = recording_target.base_url.rsplit(":", 1)[1]

    outcome = await call_once(executor, f"http://target.test:{port}/named")

    assert outcome.status is RunStatus.SUCCEEDED
    [request] = recording_target.received("/named")
    assert request.header("Host") == f"target.test:{port}"
    assert resolver.lookups == ["target.test"]


async def test_connections_are_pooled(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    resolver = FakeResolver({"target.test": ["127.0.0.1"]})
    executor = make_executor(resolver=resolver)
    port = recording_target.base_url.rsplit(":", 1)[1]
    task = http_task(f"http://target.test:{port}/")

    for _ in range(3):
        await executor.execute(task, make_run(task), None)

    assert len(recording_target.received()) == 3
    assert resolver.lookups == ["target.test"]  # one connection, kept alive


@pytest.mark.parametrize(
    ("body", "limit", "expected"),
    [
        pytest.param(b"x" * 5000, 100, "x" * 100, id="capped"),
        pytest.param(b"short", 100, "short", id="whole"),
        pytest.param(b"ok\xff\x00end", 100, "ok\ufffd\ufffdend", id="bad-bytes-and-nul"),
        pytest.param("é".encode() * 10, 5, "éé\ufffd", id="cut-inside-a-character"),
        pytest.param(b"anything", 0, "", id="zero"),
    ],
)
async def test_response_excerpt(
    make_executor: MakeExecutor,
    recording_target: RecordingTarget,
    body: bytes,
    limit: int,
    expected: str,
) -> None:
    executor = make_executor(HttpExecutorSettings(response_excerpt_bytes=limit))
    recording_target.respond("/", Response(200, body))

    outcome = await call_once(executor, recording_target.url("/"))

    assert outcome.response_excerpt == expected


async def test_cancellation_propagates(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", Response(delay=10))
    task = http_task(recording_target.url("/"))
    call = asyncio.create_task(executor.execute(task, make_run(task), None))

    async def received() -> bool:  # the target runs in another thread
        return bool(recording_target.received())

    await eventually(received, "the target to have the call")
    call.cancel()

    with pytest.raises(asyncio.CancelledError):
        await call


def test_settings_reject_an_excerpt_beyond_the_run_limit() -> None:
    with pytest.raises(ValueError, match="response_excerpt_bytes"):
        HttpExecutorSettings(response_excerpt_bytes=4096)


async def test_non_ascii_header_values_are_sent_as_utf8(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    executor = make_executor(environ={"TOK": "tøken"})
    task = http_task(
        recording_target.url("/"),
        headers={"X-Team": "café"},
        auth={"type": "bearer", "token_env": "TOK"},
    )

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.SUCCEEDED
    [request] = recording_target.received()
    # http.server decodes header bytes as ISO-8859-1.
    assert request.header("X-Team") == "café".encode().decode("latin-1")
    assert request.header("Authorization") == "Bearer tøken".encode().decode("latin-1")


async def test_attempts_are_logged_with_their_fields(
    executor: HttpExecutor,
    recording_target: RecordingTarget,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="scheduler.http")
    recording_target.respond("/", Response(503), Response(200))
    task = http_task(recording_target.url("/"), retry=FAST_RETRY)
    run = make_run(task)

    await executor.execute(task, run, None)

    attempts = [r for r in caplog.records if r.name == "scheduler.http" and "ms" in r.message]
    # The record's extra fields, set by the executor's `extra=`: not LogRecord attributes.
    fields = ("task_id", "run_id", "attempt", "http_status")
    assert [tuple(getattr(r, name) for name in fields) for r in attempts] == [
        (str(task.id), str(run.id), 1, 503),
        (str(task.id), str(run.id), 2, 200),
    ]
    # A success is DEBUG (the engine logs each run's outcome); a failed attempt WARNING.
    assert [r.levelno for r in attempts] == [logging.WARNING, logging.DEBUG]


@pytest.mark.parametrize(
    ("method", "url", "headers", "body"),
    [
        ("POST", "http://reports.test:8080/run", {"X-Team": "data"}, {"any": "json", "é": "ü"}),
        ("GET", "http://reports.test/", {}, None),
        ("GET", "http://reports.test/", {}, {"q": 1}),
        ("POST", "https://reports.test/", {}, None),
        ("DELETE", "https://reports.test/", {"accept": "text/plain", "user-agent": "mine"}, None),
        ("PUT", "http://[::1]:8080/a?b=c", {"content-type": "text/plain"}, "a string"),
        (
            "PATCH",
            "http://Reports.TEST:80/x",
            {"Host": "elsewhere.test", "Content-Length": "3"},
            [1],
        ),
        ("POST", "http://reports.test/", {"Transfer-Encoding": "chunked"}, None),
        ("POST", "http://xn--caf-dma.test/", {"X-Name": "café"}, {"n": 1.5, "none": None}),
    ],
)
def test_requests_are_built_as_httpx_builds_them(
    executor: HttpExecutor, method: str, url: str, headers: dict[str, str], body: JsonValue
) -> None:
    # The executor builds its requests itself, to save time; httpx's build_request is
    # the reference, header for header and byte for byte.
    pairs = [(name.encode(), value.encode()) for name, value in headers.items()]

    request = PreparedRequest(method, url, dict(headers), body, webhook_id="task:1")
    built = build_request(executor._http(), request, list(pairs), 5.0)
    reference = executor._http().build_request(
        method, url, headers=pairs, json=body, timeout=httpx.Timeout(5.0)
    )

    assert (built.method, built.url) == (reference.method, reference.url)
    assert built.headers.raw == reference.headers.raw
    assert built.read() == reference.read()
    assert built.extensions == reference.extensions
