"""`target.headers_env`: header values read from the environment when a call is made."""

from __future__ import annotations

import logging

import pytest

from adapters.http import HttpExecutor
from domain.errors import InvalidRequest
from domain.runs import RunStatus
from tests.adapters.http.builders import FAST_RETRY, http_task, make_run
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
