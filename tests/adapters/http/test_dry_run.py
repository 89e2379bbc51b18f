"""render(): the first request a run would send, with secrets redacted for a dry run."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from adapters.http import HttpExecutor
from domain.errors import InvalidRequest
from tests.adapters.http.builders import T0, http_task, make_run, stored_http_task
from tests.adapters.http.conftest import MakeExecutor
from tests.fixtures.target import RecordingTarget

OAUTH2 = {
    "type": "oauth2_client_credentials",
    "token_url": "http://127.0.0.1:9/token",
    "client_id": "c",
    "client_secret_env": "SECRET",
}


async def test_every_header_that_would_be_sent(executor: HttpExecutor) -> None:
    task = http_task(
        "http://reports.test:8080/run", headers={"X-Team": "data"}, body={"any": "json"}
    )
    run = make_run(task)

    rendered = await executor.render(task, run, None, redact=True)

    assert rendered.method == "POST"
    assert rendered.url == "http://reports.test:8080/run"
    assert rendered.body == {"any": "json"}
    assert rendered.headers == {
        "Host": "reports.test:8080",
        "Accept": "*/*",
        "Accept-Encoding": "gzip, deflate",
        "Connection": "keep-alive",
        "User-Agent": "imbi-scheduler/0.1.0",
        "X-Team": "data",
        "Idempotency-Key": f"{task.id}:{int(T0.timestamp())}",
        "X-Scheduler-Task-Id": str(task.id),
        "X-Scheduler-Run-Id": str(run.id),
        "X-Scheduler-Scheduled-For": "2026-03-09T06:30:00Z",
        "Content-Length": "14",
        "Content-Type": "application/json",
    }


async def test_the_rendered_headers_are_what_is_sent(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    executor = make_executor(environ={"TOK": "t0ken"})
    task = http_task(
        recording_target.url("/"), auth={"type": "bearer", "token_env": "TOK"}, body=[1]
    )
    run = make_run(task)

    rendered = await executor.render(task, run, None, redact=False)
    await executor.execute(task, run, None)

    sent = recording_target.received()[0].headers
    assert {k.lower(): v for k, v in rendered.headers.items()} == {
        k.lower(): v for k, v in sent.items()
    }


@pytest.mark.parametrize(
    ("auth", "shown"),
    [
        pytest.param({"type": "bearer", "token_env": "TOK"}, "Bearer ***", id="bearer"),
        pytest.param(
            {"type": "basic", "username": "u", "password_env": "PW"}, "Basic ***", id="basic"
        ),
        pytest.param(OAUTH2, "Bearer ***", id="oauth2"),
    ],
)
async def test_secrets_are_redacted(
    make_executor: MakeExecutor, auth: dict[str, Any], shown: str
) -> None:
    executor = make_executor(environ={"TOK": "t0ken", "PW": "pa55", "SECRET": "s3cret"})
    task = http_task("http://reports.test/", auth=auth)

    rendered = await executor.render(task, make_run(task), None, redact=True)

    assert rendered.headers["Authorization"] == shown
    dumped = rendered.model_dump_json()
    for secret in ("t0ken", "pa55", "s3cret", base64.b64encode(b"u:pa55").decode()):
        assert secret not in dumped


async def test_a_redacted_oauth2_dry_run_fetches_no_token(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    executor = make_executor(environ={"SECRET": "s3cret"})
    task = http_task(
        recording_target.url("/"), auth={**OAUTH2, "token_url": recording_target.url("/token")}
    )

    rendered = await executor.render(task, make_run(task), None, redact=True)

    assert rendered.headers["Authorization"] == "Bearer ***"
    assert recording_target.received() == []


async def test_an_authorization_header_a_task_stored_is_redacted(executor: HttpExecutor) -> None:
    task = stored_http_task("http://reports.test/", headers={"authorization": "Token abc"})

    rendered = await executor.render(task, make_run(task), None, redact=True)

    assert {k.lower(): v for k, v in rendered.headers.items()}["authorization"] == "***"


async def test_unredacted_shows_the_secret(make_executor: MakeExecutor) -> None:
    executor = make_executor(environ={"PW": "pa55"})
    task = http_task(
        "http://reports.test/", auth={"type": "basic", "username": "u", "password_env": "PW"}
    )

    rendered = await executor.render(task, make_run(task), None, redact=False)

    assert rendered.headers["Authorization"] == "Basic " + base64.b64encode(b"u:pa55").decode()


async def test_unredacted_with_a_missing_variable(executor: HttpExecutor) -> None:
    task = http_task("http://reports.test/", auth={"type": "bearer", "token_env": "TOK"})

    with pytest.raises(InvalidRequest) as rejected:
        await executor.render(task, make_run(task), None, redact=False)

    assert rejected.value.field == "target.auth.token_env"


async def test_templates_are_rendered(executor: HttpExecutor) -> None:
    task = http_task(
        "http://reports.test/{{ task.name }}", template=True, body={"at": "{{ scheduled_for }}"}
    )

    rendered = await executor.render(task, make_run(task), None, redact=True)

    assert rendered.url == "http://reports.test/nightly-report"
    assert rendered.body == {"at": "2026-03-09T06:30:00Z"}


async def test_a_template_that_fails_to_render(executor: HttpExecutor) -> None:
    task = http_task("http://reports.test/", template=True, body={"x": "{{ task.nope }}"})

    with pytest.raises(InvalidRequest) as rejected:
        await executor.render(task, make_run(task), None, redact=True)

    assert rejected.value.field == "target.body.x"


async def test_a_manual_run(executor: HttpExecutor) -> None:
    task = http_task("http://reports.test/")
    run = make_run(task, manual=True)

    rendered = await executor.render(task, run, None, redact=True)

    assert rendered.headers["Idempotency-Key"] == f"{task.id}:{run.id}"
