"""`target.headers_env`: header values read from the environment when a call is made."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from urllib.parse import quote, quote_plus

import pytest

from adapters.http import HttpExecutor
from domain.errors import InvalidRequest
from domain.runs import RunStatus
from tests.adapters.http.builders import FAST_RETRY, http_task, make_run, stored_http_task
from tests.adapters.http.conftest import MakeExecutor
from tests.fixtures.target import RecordingTarget, Response

API_KEY = "k3y-only-the-environment-knows"


async def test_headers_carry_the_values_of_the_variables_they_name(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    environ = {"REPORTS_API_KEY": API_KEY, "TENANT": "acme"}
    executor = make_executor(environ=environ)
    task = http_task(
        recording_target.url("/"),
        headers={"X-Team": "data"},
        headers_env={"X-Api-Key": "REPORTS_API_KEY", "X-Tenant": "TENANT"},
    )

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.SUCCEEDED
    received = recording_target.received()[0]
    assert received.header("X-Api-Key") == API_KEY
    assert received.header("X-Tenant") == "acme"
    assert received.header("X-Team") == "data"


async def test_the_environment_is_read_at_each_call(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    environ = {"KEY": "first"}
    executor = make_executor(environ=environ)
    task = http_task(recording_target.url("/"), headers_env={"X-Api-Key": "KEY"})

    await executor.execute(task, make_run(task), None)
    environ["KEY"] = "rotated"
    await executor.execute(task, make_run(task), None)

    assert [r.header("X-Api-Key") for r in recording_target.received()] == ["first", "rotated"]


async def test_every_retry_carries_them(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", Response(503), Response(200))
    executor = make_executor(environ={"KEY": API_KEY})
    task = http_task(recording_target.url("/"), headers_env={"X-Api-Key": "KEY"}, retry=FAST_RETRY)

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.attempts == 2
    assert [r.header("X-Api-Key") for r in recording_target.received()] == [API_KEY, API_KEY]


@pytest.mark.parametrize("environ", [{}, {"KEY": ""}], ids=["unset", "empty"])
async def test_a_missing_variable_fails_the_run_naming_only_the_variable(
    make_executor: MakeExecutor,
    recording_target: RecordingTarget,
    environ: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    executor = make_executor(environ={"OTHER": API_KEY, **environ})
    task = http_task(
        recording_target.url("/"), headers_env={"X-Other": "OTHER", "X-Api-Key": "KEY"}
    )

    with caplog.at_level(logging.DEBUG):
        outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.FAILED
    assert outcome.attempts == 0
    assert outcome.error == (
        "environment variable KEY is not set (named by target.headers_env.X-Api-Key)"
    )
    assert recording_target.received() == []  # nothing was called
    assert API_KEY not in caplog.text


async def test_values_echoed_by_the_target_are_scrubbed_from_the_excerpt(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", Response(500, f"bad key {API_KEY}!".encode()))
    executor = make_executor(environ={"KEY": API_KEY})
    task = http_task(recording_target.url("/"), headers_env={"X-Api-Key": "KEY"})

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.response_excerpt == "bad key ***!"


@pytest.mark.parametrize(
    "echoed",
    [
        pytest.param(lambda key: json.dumps({"X-Api-Key": key}), id="json"),
        pytest.param(lambda key: json.dumps({"k": key}).replace("/", "\\/"), id="json-slashes"),
        pytest.param(lambda key: repr(key.encode()), id="python-bytes"),
        pytest.param(lambda key: json.dumps({"k": key.encode().decode("latin-1")}), id="latin-1"),
        # Echoed in a query string or a form (a webhook-signature's `+` and `/` too).
        pytest.param(lambda key: "?k=" + quote(key, safe=""), id="percent-encoded"),
        pytest.param(lambda key: "k=" + quote_plus(key, safe=""), id="form-encoded"),
    ],
)
async def test_values_echoed_escaped_are_scrubbed_too(
    make_executor: MakeExecutor,
    recording_target: RecordingTarget,
    echoed: Callable[[str], str],
) -> None:
    # A target echoing its request as JSON escapes quotes, backslashes, `/` (some) and
    # non-ASCII; a secret read back as Latin-1 is two characters for each non-ASCII one.
    key = 'p"w/sécret\\x'
    recording_target.respond("/", Response(500, echoed(key).encode()))
    executor = make_executor(environ={"KEY": key})
    task = http_task(recording_target.url("/"), headers_env={"X-Api-Key": "KEY"})

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.response_excerpt is not None
    assert "***" in outcome.response_excerpt
    assert "cret" not in outcome.response_excerpt


async def test_the_line_break_that_ends_a_secret_file_is_not_sent(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    # A Kubernetes Secret made from a file keeps the file's last newline; HTTP strips
    # the whitespace around a field value anyway, and no value may carry a line break.
    executor = make_executor(environ={"KEY": f" {API_KEY}\r\n", "TOKEN": f"{API_KEY}\n"})
    task = http_task(
        recording_target.url("/"),
        headers_env={"X-Api-Key": "KEY"},
        auth={"type": "bearer", "token_env": "TOKEN"},
    )

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.SUCCEEDED
    received = recording_target.received()[0]
    assert received.header("X-Api-Key") == API_KEY
    assert received.header("Authorization") == f"Bearer {API_KEY}"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (f"{API_KEY}\nX-Injected: 1", "holds a line break or NUL, which no header may carry"),
        (" \n ", "holds only whitespace"),
    ],
)
async def test_a_secret_no_header_can_carry_fails_the_run_naming_only_the_variable(
    make_executor: MakeExecutor,
    recording_target: RecordingTarget,
    caplog: pytest.LogCaptureFixture,
    value: str,
    problem: str,
) -> None:
    executor = make_executor(environ={"KEY": value})
    task = http_task(recording_target.url("/"), headers_env={"X-Api-Key": "KEY"})

    with caplog.at_level(logging.DEBUG):
        outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.FAILED
    assert outcome.attempts == 0
    assert outcome.error == (
        f"environment variable KEY {problem} (named by target.headers_env.X-Api-Key)"
    )
    assert recording_target.received() == []
    assert API_KEY not in caplog.text


async def test_a_dry_run_shows_stars_and_reads_no_variable(executor: HttpExecutor) -> None:
    task = http_task("http://reports.test/", headers_env={"X-Api-Key": "UNSET_KEY"})

    rendered = await executor.render(task, make_run(task), None, redact=True)

    assert rendered.headers["X-Api-Key"] == "***"


async def test_an_unredacted_render_reads_them_and_names_a_missing_one(
    make_executor: MakeExecutor,
) -> None:
    task = http_task("http://reports.test/", headers_env={"X-Api-Key": "KEY"})

    rendered = await make_executor(environ={"KEY": API_KEY}).render(
        task, make_run(task), None, redact=False
    )
    assert rendered.headers["X-Api-Key"] == API_KEY

    with pytest.raises(InvalidRequest) as raised:
        await make_executor().render(task, make_run(task), None, redact=False)
    assert raised.value.field == "target.headers_env.X-Api-Key"


async def test_a_literal_authorization_header_echoed_back_is_scrubbed_too(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    # A task stored before such headers were refused still sends it: it is a credential,
    # which the run's excerpt hides as it hides those auth and headers_env name.
    recording_target.respond("/", Response(500, f"token {API_KEY} refused".encode()))
    executor = make_executor(environ={})
    headers = {"Authorization": f"Bearer {API_KEY}"}
    task = stored_http_task(recording_target.url("/"), headers=headers)

    outcome = await executor.execute(task, make_run(task), None)

    assert recording_target.received()[0].header("Authorization") == f"Bearer {API_KEY}"
    assert outcome.response_excerpt == "token *** refused"


@pytest.mark.parametrize(
    "target",
    [
        {"headers_env": {"X-A": "SCHEDULER_API_TOKENS"}},
        {"auth": {"type": "bearer", "token_env": "SCHEDULER_API_TOKENS"}},
    ],
    ids=["headers_env", "auth"],
)
async def test_a_stored_task_naming_a_setting_of_the_scheduler_fails_uncalled(
    make_executor: MakeExecutor, recording_target: RecordingTarget, target: dict[str, object]
) -> None:
    # Stored before such names were refused: its runs fail, and the value is never read.
    executor = make_executor(environ={"SCHEDULER_API_TOKENS": API_KEY})
    task = stored_http_task(recording_target.url("/"), **target)

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.FAILED and outcome.attempts == 0
    assert outcome.error is not None
    assert outcome.error.startswith("environment variable SCHEDULER_API_TOKENS is one of")
    assert API_KEY not in outcome.error
    assert recording_target.received() == []
