"""Templates checked when a task is written: a template that does not parse, reads an
unknown name or what the sandbox never allows is refused naming its field; good ones,
and loops and macros within the render bounds, pass and render."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.http import HttpExecutor
from domain.errors import InvalidRequest
from domain.runs import RunStatus
from domain.tasks import HttpTarget
from tests.adapters.http.builders import http_task, make_run
from tests.fixtures.target import RecordingTarget


@pytest.mark.parametrize(
    ("target", "field", "message"),
    [
        pytest.param(
            {"url": "http://h.test/{{ task.name"},
            "target.url",
            "template does not parse",
            id="url-syntax",
        ),
        pytest.param(
            {"url": "http://h.test/", "headers": {"X-Team": "{% if %}"}},
            "target.headers.X-Team",
            "template does not parse",
            id="header-syntax",
        ),
        pytest.param(
            {"url": "http://h.test/", "body": {"a": [1, "{{ }}"]}},
            "target.body.a.1",
            "template does not parse",
            id="body-syntax",
        ),
        pytest.param(
            {"url": "http://h.test/", "body": {"a": "{{ secrets.TOKEN }}"}},
            "target.body.a",
            "template uses unknown secrets",
            id="unknown-name",
        ),
        pytest.param(
            {"url": "http://h.test/", "body": {"a": "{{ task.__class__.__mro__ }}"}},
            "target.body.a",
            "template reads .__class__, .__mro__, which the sandbox never allows",
            id="dunder-attribute",
        ),
        pytest.param(
            {"url": "http://h.test/{% if run.id.__len__ %}x{% endif %}"},
            "target.url",
            "template reads .__len__",
            id="dunder-in-a-condition",
        ),
    ],
)
def test_check_rejects_a_bad_template(
    executor: HttpExecutor, target: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(InvalidRequest) as rejected:
        executor.check(HttpTarget.model_validate({**target, "template": True}))

    assert rejected.value.field == field
    assert rejected.value.message.startswith(message)


def test_check_ignores_template_syntax_when_template_is_false(executor: HttpExecutor) -> None:
    executor.check(HttpTarget(url="http://h.test/", body={"a": "{{ not a template"}))


def test_check_accepts_good_templates(executor: HttpExecutor) -> None:
    executor.check(
        HttpTarget(
            url="http://h.test/{{ task.name }}",
            headers={"X-At": "{{ now }}"},
            body={
                "a": ["{% if last_run %}{{ last_run }}{% endif %}", "{{ run.id }}"],
                "b": "{% for i in range(3) %}{{ i }}{% endfor %}",
                "c": "{{ task.target.body['__key__'] }}{{ task._private }}",
            },
            template=True,
        )
    )


async def test_loops_and_macros_within_the_bounds_render(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    body = {
        "hours": "{% for h in range(24) %}{{ '%02d' % h }}{{ ',' if not loop.last }}{% endfor %}",
        "count": "{% set n = namespace(i=0) %}"
        "{% for i in range(5000) %}{% set n.i = n.i + 1 %}{% endfor %}{{ n.i }}",
        "macro": "{% macro twice(s) %}{{ s ~ s }}{% endmacro %}{{ twice(task.name) }}",
        "values": "{{ '{}'.format(1733500000) }} {{ '%d' | format(1733500000) }} "
        "{{ dict(t=1733500000).t }} {{ range(1733500000, 1733500002) | join(',') }}",
    }
    task = http_task(recording_target.url("/"), template=True, body=body)

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.SUCCEEDED, outcome.error
    sent = recording_target.received()[0].json()
    assert sent["hours"] == ",".join(f"{h:02d}" for h in range(24))
    assert sent["count"] == "5000"
    assert sent["macro"] == task.name * 2
    assert sent["values"] == "1733500000 1733500000 1733500000 1733500000,1733500001"
