"""Auth flows: secrets from the environment, OAuth2 client credentials, and no secret
ever leaking into an outcome, an error or a log line."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from typing import Any
from urllib.parse import parse_qs

import pytest

from adapters.http import HttpExecutor
from domain.runs import RunOutcome, RunStatus
from domain.tasks import Task
from tests.adapters.http.builders import FAST_RETRY, http_task, make_run
from tests.adapters.http.conftest import MakeExecutor
from tests.fixtures.target import RecordingTarget, Response

TOKEN = "s3cret-bearer-token"
PASSWORD = "hunter2-password"
CLIENT_SECRET = "client-secret-value"


def token_answer(token: str, expires_in: int = 3600) -> Response:
    body = {"access_token": token, "token_type": "Bearer", "expires_in": expires_in}
    return Response(200, json.dumps(body).encode(), {"Content-Type": "application/json"})


def oauth2_task(target: RecordingTarget, retry: dict[str, Any] | None = None, **auth: str) -> Task:
    return http_task(
        target.url("/api"),
        retry=retry or {},
        auth={
            "type": "oauth2_client_credentials",
            "token_url": target.url("/token"),
            "client_id": "scheduler",
            "client_secret_env": "CLIENT_SECRET",
            **auth,
        },
    )


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


async def test_bearer_token_from_the_environment(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    executor = make_executor(environ={"REPORTS_TOKEN": TOKEN})
    task = http_task(
        recording_target.url("/"), auth={"type": "bearer", "token_env": "REPORTS_TOKEN"}
    )

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.SUCCEEDED
    assert recording_target.received()[0].header("Authorization") == f"Bearer {TOKEN}"


async def test_basic_auth_from_the_environment(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    executor = make_executor(environ={"REPORTS_PASSWORD": PASSWORD})
    task = http_task(
        recording_target.url("/"),
        auth={"type": "basic", "username": "svc", "password_env": "REPORTS_PASSWORD"},
    )

    await executor.execute(task, make_run(task), None)

    assert recording_target.received()[0].header("Authorization") == basic("svc", PASSWORD)


async def test_the_environment_is_read_at_call_time(
    recording_target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = HttpExecutor()  # os.environ
    task = http_task(recording_target.url("/"), auth={"type": "bearer", "token_env": "LATE_TOK"})
    monkeypatch.setenv("LATE_TOK", TOKEN)
    try:
        await executor.execute(task, make_run(task), None)
    finally:
        await executor.close()

    assert recording_target.received()[0].header("Authorization") == f"Bearer {TOKEN}"


@pytest.mark.parametrize(
    ("auth", "variable"),
    [
        pytest.param(
            {"type": "bearer", "token_env": "NO_SUCH_TOKEN"}, "NO_SUCH_TOKEN", id="bearer"
        ),
        pytest.param(
            {"type": "basic", "username": "u", "password_env": "NO_SUCH_PW"},
            "NO_SUCH_PW",
            id="basic",
        ),
        pytest.param(
            {
                "type": "oauth2_client_credentials",
                "token_url": "http://127.0.0.1:9/token",
                "client_id": "c",
                "client_secret_env": "NO_SUCH_SECRET",
            },
            "NO_SUCH_SECRET",
            id="oauth2",
        ),
    ],
)
async def test_a_missing_variable_fails_the_run_naming_it(
    make_executor: MakeExecutor,
    recording_target: RecordingTarget,
    auth: dict[str, Any],
    variable: str,
) -> None:
    executor = make_executor(environ={"OTHER": "x", variable + "_NOT": "y"})
    task = http_task(recording_target.url("/"), auth=auth)

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.FAILED
    assert outcome.attempts == 0
    assert outcome.error is not None and variable in outcome.error
    assert recording_target.received() == []


async def test_an_empty_variable_counts_as_missing(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    executor = make_executor(environ={"TOK": ""})
    task = http_task(recording_target.url("/"), auth={"type": "bearer", "token_env": "TOK"})

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.error == "environment variable TOK is not set (named by target.auth.token_env)"


async def test_oauth2_with_basic_client_auth(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/token", token_answer("access-1"))
    executor = make_executor(environ={"CLIENT_SECRET": CLIENT_SECRET})
    task = oauth2_task(recording_target, scope="reports:run", audience="https://reports")

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.SUCCEEDED
    [token_request] = recording_target.received("/token")
    assert token_request.method == "POST"
    assert token_request.header("Content-Type") == "application/x-www-form-urlencoded"
    assert token_request.header("Authorization") == basic("scheduler", CLIENT_SECRET)
    assert parse_qs(token_request.body.decode()) == {
        "grant_type": ["client_credentials"],
        "scope": ["reports:run"],
        "audience": ["https://reports"],
    }
    [call] = recording_target.received("/api")
    assert call.header("Authorization") == "Bearer access-1"


async def test_oauth2_with_post_client_auth(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/token", token_answer("access-1"))
    executor = make_executor(environ={"CLIENT_SECRET": CLIENT_SECRET})
    task = oauth2_task(recording_target, client_auth="post")

    await executor.execute(task, make_run(task), None)

    [token_request] = recording_target.received("/token")
    assert token_request.header("Authorization") is None
    assert parse_qs(token_request.body.decode()) == {
        "grant_type": ["client_credentials"],
        "client_id": ["scheduler"],
        "client_secret": [CLIENT_SECRET],
    }


async def test_oauth2_token_is_cached_across_runs(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/token", token_answer("access-1"), token_answer("access-2"))
    executor = make_executor(environ={"CLIENT_SECRET": CLIENT_SECRET})
    task = oauth2_task(recording_target)
    other_task = oauth2_task(recording_target)  # same client: shares the token

    for each in (task, task, other_task):
        await executor.execute(each, make_run(each), None)

    assert len(recording_target.received("/token")) == 1
    assert {r.header("Authorization") for r in recording_target.received("/api")} == {
        "Bearer access-1"
    }


async def test_concurrent_runs_fetch_one_token(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    slow_token = Response(200, token_answer("access-1").body, delay=0.2)
    recording_target.respond("/token", slow_token)
    executor = make_executor(environ={"CLIENT_SECRET": CLIENT_SECRET})
    task = oauth2_task(recording_target)

    outcomes = await asyncio.gather(
        *(executor.execute(task, make_run(task), None) for _ in range(10))
    )

    assert {o.status for o in outcomes} == {RunStatus.SUCCEEDED}
    assert len(recording_target.received("/token")) == 1
    assert len(recording_target.received("/api")) == 10


async def test_oauth2_token_about_to_expire_is_fetched_again(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/token", token_answer("access-1", 0), token_answer("access-2", 0))
    executor = make_executor(environ={"CLIENT_SECRET": CLIENT_SECRET})
    task = oauth2_task(recording_target)

    await executor.execute(task, make_run(task), None)
    await executor.execute(task, make_run(task), None)

    assert [r.header("Authorization") for r in recording_target.received("/api")] == [
        "Bearer access-1",
        "Bearer access-2",
    ]


async def test_oauth2_scope_is_part_of_the_cache_key(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/token", token_answer("access-1"), token_answer("access-2"))
    executor = make_executor(environ={"CLIENT_SECRET": CLIENT_SECRET})

    for scope in ("a", "b"):
        task = oauth2_task(recording_target, scope=scope)
        await executor.execute(task, make_run(task), None)

    assert len(recording_target.received("/token")) == 2


async def test_oauth2_refreshes_once_on_401(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/token", token_answer("access-1"), token_answer("access-2"))
    recording_target.respond("/api", Response(401), Response(200, b"welcome"))
    executor = make_executor(environ={"CLIENT_SECRET": CLIENT_SECRET})
    task = oauth2_task(recording_target)
    run = make_run(task)

    outcome = await executor.execute(task, run, None)

    assert outcome.status is RunStatus.SUCCEEDED
    assert outcome.attempts == 2
    calls = recording_target.received("/api")
    assert [c.header("Authorization") for c in calls] == ["Bearer access-1", "Bearer access-2"]
    assert calls[0].header("Idempotency-Key") == calls[1].header("Idempotency-Key")
    # The new token is cached for the next run.
    await executor.execute(task, make_run(task), None)
    assert len(recording_target.received("/token")) == 2


async def test_oauth2_refreshes_only_once_per_run(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/token", token_answer("access-1"), token_answer("access-2"))
    recording_target.respond("/api", Response(401))
    executor = make_executor(environ={"CLIENT_SECRET": CLIENT_SECRET})
    task = oauth2_task(recording_target)

    outcome = await executor.execute(task, make_run(task), None)

    assert (outcome.status, outcome.http_status, outcome.attempts) == (RunStatus.FAILED, 401, 2)
    assert len(recording_target.received("/token")) == 2


async def test_oauth2_token_endpoint_refusing_fails_the_run(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond(
        "/token", Response(401, json.dumps({"error": "invalid_client"}).encode())
    )
    executor = make_executor(environ={"CLIENT_SECRET": CLIENT_SECRET})
    task = oauth2_task(recording_target)

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.FAILED
    assert outcome.error == (
        f"oauth2 token request to {recording_target.url('/token')} failed: "
        "HTTP 401 (invalid_client)"
    )
    assert recording_target.received("/api") == []


async def test_oauth2_token_endpoint_outage_is_retried(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/token", Response(503), token_answer("access-1"))
    executor = make_executor(environ={"CLIENT_SECRET": CLIENT_SECRET})
    task = oauth2_task(recording_target, retry=FAST_RETRY)

    outcome = await executor.execute(task, make_run(task), None)

    assert (outcome.status, outcome.attempts) == (RunStatus.SUCCEEDED, 2)


def assert_no_secret(outcome: RunOutcome, logs: str, secrets: list[str]) -> None:
    dumped = outcome.model_dump_json()
    for secret in secrets:
        assert secret not in dumped
        assert secret not in logs


@pytest.mark.parametrize("status", [200, 500])
async def test_secrets_stay_out_of_outcomes_and_logs(
    make_executor: MakeExecutor,
    recording_target: RecordingTarget,
    caplog: pytest.LogCaptureFixture,
    status: int,
) -> None:
    caplog.set_level(logging.DEBUG)
    encoded = basic("svc", PASSWORD).removeprefix("Basic ")
    # A target that echoes what it received, secrets included.
    echo = f"you sent {PASSWORD} as {encoded}".encode()
    recording_target.respond("/", Response(status, echo))
    executor = make_executor(environ={"PW": PASSWORD})
    task = http_task(
        recording_target.url("/"),
        auth={"type": "basic", "username": "svc", "password_env": "PW"},
        retry=FAST_RETRY,
    )

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.response_excerpt == "you sent *** as ***"
    assert_no_secret(outcome, caplog.text, [PASSWORD, encoded])


async def test_oauth2_secrets_stay_out_of_outcomes_and_logs(
    make_executor: MakeExecutor,
    recording_target: RecordingTarget,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    recording_target.respond("/token", token_answer("the-access-token"))
    recording_target.respond("/api", Response(502, b"token the-access-token rejected"))
    executor = make_executor(environ={"CLIENT_SECRET": CLIENT_SECRET})
    task = oauth2_task(recording_target)

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.response_excerpt == "token *** rejected"
    assert_no_secret(outcome, caplog.text, [CLIENT_SECRET, "the-access-token"])


async def test_a_bearer_token_stays_out_of_a_timeout_and_its_logs(
    make_executor: MakeExecutor,
    recording_target: RecordingTarget,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    recording_target.respond("/", Response(delay=5))
    executor = make_executor(environ={"TOK": TOKEN})
    task = http_task(
        recording_target.url("/"),
        auth={"type": "bearer", "token_env": "TOK"},
        timeout_seconds=0.2,
    )

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.error == "timed out after 0.2s"
    assert_no_secret(outcome, caplog.text, [TOKEN])
