"""Templates: what they see, what they render, and the errors at create and at run."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from adapters.http import HttpExecutor
from domain.errors import InvalidRequest
from domain.runs import RunStatus
from tests.adapters.http.builders import T0, http_task, make_run
from tests.fixtures.target import RecordingTarget


async def test_url_headers_and_body_are_rendered(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    task = http_task(
        recording_target.url("/{{ task.name }}?at={{ scheduled_for }}"),
        template=True,
        tags=["reports", "nightly"],
        headers={"X-Run": "{{ run.id }}", "X-Manual": "{{ run.manual }}"},
        body={
            "task": "{{ task.id }}",
            "window": ["{{ last_run }}", "{{ run.scheduled_for }}"],
            "tags": "{{ task.tags | join(',') }}",
            "untouched": 5,
            "{{ keys }}": "are not templates",
        },
    )
    run = make_run(task)

    outcome = await executor.execute(task, run, T0 - timedelta(hours=1))

    assert outcome.status is RunStatus.SUCCEEDED
    [request] = recording_target.received()
    assert request.path == "/nightly-report?at=2026-03-09T06:30:00Z"
    assert request.header("X-Run") == str(run.id)
    assert request.header("X-Manual") == "false"
    assert request.json() == {
        "task": str(task.id),
        "window": ["2026-03-09T05:30:00Z", "2026-03-09T06:30:00Z"],
        "tags": "reports,nightly",
        "untouched": 5,
        "{{ keys }}": "are not templates",
    }


async def test_last_run_is_null_on_a_first_run_and_now_is_utc(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    task = http_task(
        recording_target.url("/"),
        template=True,
        body={
            "last": "{{ last_run is none }}",
            "printed": "{{ last_run }}",
            "since": "{{ last_run or 'never' }}",
            "description": "[{{ task.description }}]",
            "now": "{{ now }}",
        },
    )

    await executor.execute(task, make_run(task), None)

    body = recording_target.received()[0].json()
    assert body["last"] == "true"  # as JSON spells it, never Python's "True"
    assert body["printed"] == ""  # null prints as nothing, never as "None"
    assert body["since"] == "never"
    assert body["description"] == "[]"
    assert body["now"].endswith("Z")


async def test_the_task_as_json_has_no_internal_fields(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    task = http_task(
        recording_target.url("/"),
        template=True,
        body={
            "next_fire_at": "{{ 'next_fire_at' in task }}",
            "failing": "{{ 'failing' in task }}",
            "next": "{{ task.next_run_at }}",
            "manual": "{{ run.manual }}",
            "enabled": "{{ task.enabled }}",
            "tags": "{{ task.tags }}",
            "retry": "{{ task.target.retry }}",
        },
    )

    await executor.execute(task, make_run(task), None)

    body = recording_target.received()[0].json()
    assert body == {
        "next_fire_at": "false",
        "failing": "false",
        "next": "2026-03-09T06:30:00Z",
        "manual": "false",
        "enabled": "true",
        "tags": json.dumps(task.tags, separators=(",", ":")),  # JSON, never Python's repr
        "retry": '{"max_attempts":1,"backoff_seconds":1.0,"max_backoff_seconds":60.0}',
    }


async def test_without_template_strings_are_sent_as_written(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    task = http_task(recording_target.url("/"), body={"raw": "{{ task.name }}"})

    await executor.execute(task, make_run(task), None)

    assert recording_target.received()[0].json() == {"raw": "{{ task.name }}"}


@pytest.mark.parametrize(
    ("target", "field", "detail"),
    [
        pytest.param(
            {"body": {"items": [{"x": "{{ task.no_such_field }}"}]}},
            "target.body.items.0.x",
            "UndefinedError",
            id="undefined-attribute",
        ),
        pytest.param(
            {"headers": {"X-Div": "{{ 1 // 0 }}"}},
            "target.headers.X-Div",
            "ZeroDivisionError",
            id="runtime-error",
        ),
        pytest.param(
            {"body": {"x": "{{ task.__class__.__mro__ }}"}},
            "target.body.x",
            "SecurityError: access to attribute '__class__' of 'dict' object is unsafe",
            id="sandbox-private-attribute",
        ),
        pytest.param(
            {"body": {"x": "{{ 'x' * 100000000 }}"}},
            "target.body.x",
            "SecurityError",
            id="sandbox-huge-string",
        ),
        pytest.param(
            {
                # A long template (a comment of 20,000 characters) may take 4,9xx steps:
                # it meets that bound long before the CPU one on any machine.
                "body": "{# " + "x" * 20_000 + " #}"
                "{% for i in range(20000) %}{% for j in range(2000) %}"
                "{% endfor %}{% endfor %}"
            },
            "target.body",
            "SecurityError: the template took more than 49",
            id="nested-loops",
        ),
        pytest.param(
            {
                "body": "{# " + "x" * 20_000 + " #}"
                "{% macro m(n) %}{% if n %}{{ m(n - 1) }}{{ m(n - 1) }}{% endif %}"
                "{% endmacro %}{{ m(40) }}"
            },
            "target.body",
            "SecurityError: the template took more than 49",
            id="macro-calls-doubling",
        ),
        pytest.param(
            {
                "body": "{% set s %}{% for i in range(100) %}{{ 'x' * 999999 }}{% endfor %}"
                "{% endset %}"
            },
            "target.body",
            "SecurityError: the template built more than 10000000 characters",
            id="printed-into-a-variable",
        ),
        pytest.param(
            {
                "body": "{% set ns = namespace(s='xx') %}"
                "{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
            },
            "target.body",
            "SecurityError: the result of ~ would be too large",
            id="doubling-by-tilde",
        ),
        pytest.param(
            {
                "body": "{% set ns = namespace(s='xx') %}"
                "{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"
            },
            "target.body",
            "SecurityError: the result of + would be too large",
            id="doubling-by-plus",
        ),
        pytest.param(
            {"body": "{% set l = [] %}{% for i in range(9) %}{{ l.append(i) }}{% endfor %}"},
            "target.body",
            "SecurityError",
            id="list-changed-in-place",
        ),
        pytest.param(
            {"body": "{{ ((7 ** 1000) ** 1000) ** 4 > 0 }}"},
            "target.body",
            "SecurityError: the result of ** would be too large",
            id="huge-integer-by-power",
        ),
        pytest.param(
            {
                "body": "{% set a = 7 ** 1000 %}{% set b = a * a * a * a * a * a %}"
                "{{ b * b * b * b * b * b > 0 }}"
            },
            "target.body",
            "SecurityError: the result of * would be too large",
            id="huge-integer-by-product",
        ),
        pytest.param(
            {"body": "{{ ('x' | center(10 ** 8)) | length }}"},
            "target.body",
            "SecurityError: an argument of 100000000 is too large",
            id="filter-width",
        ),
        pytest.param(
            {"body": "{{ 'x'.ljust(6 * 10 ** 8) | length }}"},
            "target.body",
            "SecurityError: an argument of 600000000 is too large",
            id="method-width",
        ),
        pytest.param(
            {"body": "{{ '{:>900000000}'.format(1) }}"},
            "target.body",
            "SecurityError: a width or precision in this format is too large",
            id="format-width",
        ),
        pytest.param(
            {"body": "{{ '%100000000d' | format(1) }}{{ '%*d' % (9, 1) }}"},
            "target.body",
            "SecurityError: a width or precision in this format is too large",
            id="percent-width",
        ),
        pytest.param(
            {"body": "{{ (' ' * 999999).replace(' ', 'abcdefghij') | length }}"},
            "target.body",
            "SecurityError: the result of replace would be too large",
            id="replace-growth",
        ),
        pytest.param(
            {"body": "{{ range(100000) | join('x' * 5000) | length }}"},
            "target.body",
            "SecurityError: the result of join would be too large",
            id="join-separator",
        ),
        pytest.param(
            {"body": "{{ lipsum(n=100000) | length }}"},
            "target.body",
            "UndefinedError",
            id="no-lipsum",
        ),
        pytest.param(
            {  # ~2 ms a search ('y' alone is one memchr, ~9 µs: within the steps)
                "body": "{% set s = 'x' * 999999 %}"
                "{% for i in range(100000) %}{{ 'xy' in s }}{% endfor %}"
            },
            "target.body",
            "SecurityError: the template used more than 1 s of CPU",
            id="cpu",
        ),
        pytest.param(
            {"body": "{% for i in range(3) %}{{ 'x' * 999999 }}{% endfor %}"},
            "target.body",
            "the target's strings render to more than 1000000 characters in all",
            id="too-long-piece-by-piece",
        ),
        pytest.param(
            {"headers": {"X-Nul": "a{{ '\\x00' }}b"}},
            "target.headers.X-Nul",
            "the value contains a control character ('\\x00')",
            id="header-control-character",
        ),
        pytest.param(
            {"body": {"x": "a{{ '\\ud800' }}"}},
            "target.body.x",
            "renders '\\ud800' at 1, a lone surrogate, which UTF-8 cannot encode",
            id="lone-surrogate",
        ),
        pytest.param(
            {"headers": {"X-Break": "a{{ '\\r\\n' }}Injected: yes"}},
            "target.headers.X-Break",
            "line break",
            id="header-injection",
        ),
    ],
)
async def test_a_render_failure_fails_the_run_without_a_call(
    executor: HttpExecutor,
    recording_target: RecordingTarget,
    target: dict[str, Any],
    field: str,
    detail: str,
) -> None:
    task = http_task(recording_target.url("/"), template=True, **target)

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.FAILED
    assert outcome.attempts == 0
    assert outcome.error is not None
    assert outcome.error.startswith(f"template {field} failed to render: ")
    assert detail in outcome.error
    assert recording_target.received() == []


@pytest.mark.parametrize(
    ("url", "error"),
    [
        pytest.param(
            "http://h.test/{{ 'a' * 5000 }}",
            f"{('http://h.test/' + 'a' * 86)!r}… (5014 characters) is 5014 characters long;"
            " a URL may have 4096",
            id="too-long-and-shown-cut-short",
        ),
        pytest.param(
            "http://{{ 'xn--' }}/x",
            "'http://xn--/x' is not a URL the client can call: "
            "Malformed A-label, no Punycode eligible content found",
            id="one-the-client-refuses",
        ),
    ],
)
async def test_a_rendered_url_is_checked_as_the_client_will_read_it(
    executor: HttpExecutor, url: str, error: str
) -> None:
    task = http_task(url, template=True)

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.error == f"template target.url failed to render: {error}"
    with pytest.raises(InvalidRequest) as refused:  # a dry run says the same, as a 422
        await executor.render(task, make_run(task), None, redact=True)
    assert str(refused.value) == f"target.url: {outcome.error}"


async def test_spaces_around_a_rendered_header_value_are_not_sent(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    task = http_task(
        recording_target.url("/"), template=True, headers={"X-Name": "  {{ task.name }}\t"}
    )

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.SUCCEEDED, outcome.error
    assert recording_target.received()[0].header("X-Name") == task.name


async def test_a_url_rendering_to_a_non_http_url_fails(executor: HttpExecutor) -> None:
    task = http_task("http://{{ '' }}/", template=True)

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.error == ("template target.url failed to render: 'http:///' must name a host")
