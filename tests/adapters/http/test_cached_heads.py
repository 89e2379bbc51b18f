"""A plain target's calls are written from a cached head (adapters/http/heads.py): the
target receives what the general path sends, and a changed target or a new call's
values are never served from an earlier call."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.http import HttpExecutor
from domain.runs import RunStatus
from domain.tasks import HttpTarget, Task
from tests.adapters.http.builders import http_task, make_run
from tests.adapters.http.conftest import MakeExecutor
from tests.fixtures.target import RecordingTarget


def retargeted(task: Task, url: str, **target: Any) -> Task:
    """`task` (the same id) with another target."""
    return task.model_copy(update={"target": HttpTarget.model_validate({"url": url, **target})})


@pytest.mark.parametrize(
    "target",
    [
        pytest.param({"body": {"any": "json", "é": [1, None]}}, id="post-json"),
        pytest.param({"method": "GET"}, id="get"),
        pytest.param({"method": "PATCH"}, id="patch-without-body"),
        pytest.param(
            {
                "method": "PUT",
                "headers": {"Accept": "text/plain", "X-Team": "data"},
                "body": "text",
            },
            id="client-headers-replaced",
        ),
        pytest.param(
            {"headers": {"content-type": "application/vnd.api+json"}, "body": [1]},
            id="own-content-type",
        ),
    ],
)
async def test_a_plain_target_is_sent_as_the_general_path_sends_it(
    executor: HttpExecutor, recording_target: RecordingTarget, target: dict[str, Any]
) -> None:
    # A templated target (here without any expression) is built by the general path.
    task = http_task(recording_target.url("/plain"), **target)
    templated = retargeted(task, recording_target.url("/templated"), template=True, **target)
    run = make_run(task)

    for each in (task, templated):
        outcome = await executor.execute(each, run, None)
        assert outcome.status is RunStatus.SUCCEEDED

    [plain] = recording_target.received("/plain")
    [general] = recording_target.received("/templated")
    assert plain.method == general.method
    assert list(plain.headers.items()) == list(general.headers.items())
    assert plain.body == general.body


async def test_a_changed_target_is_sent_as_changed(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    url = recording_target.url("/")
    first = http_task(url, headers={"X-Team": "data"}, body={"v": 1})
    changes: list[dict[str, Any]] = [
        {"headers": {"X-Team": "ops"}, "body": {"v": 1}},
        {"headers": {"X-Team": "data"}, "body": [2]},
        {"method": "PUT", "headers": {"X-Team": "data"}, "body": {"v": 1}},
    ]
    tasks = [first, *(retargeted(first, url, **change) for change in changes), first]

    for task in tasks:
        await executor.execute(task, make_run(task), None)

    assert [(r.method, r.header("X-Team"), r.json()) for r in recording_target.received()] == [
        ("POST", "data", {"v": 1}),
        ("POST", "ops", {"v": 1}),
        ("POST", "data", [2]),
        ("PUT", "data", {"v": 1}),
        ("POST", "data", {"v": 1}),
    ]


async def test_each_call_sends_its_own_values(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    environ = {"TOKEN": "first", "TEAM": "data"}
    executor = make_executor(environ=environ)
    task = http_task(
        recording_target.url("/"),
        auth={"type": "bearer", "token_env": "TOKEN"},
        headers_env={"X-Team": "TEAM"},
    )
    runs = [make_run(task), make_run(task, manual=True)]

    await executor.execute(task, runs[0], None)
    environ |= {"TOKEN": "second", "TEAM": "ops"}
    await executor.execute(task, runs[1], None)

    sent = [
        (r.header("Authorization"), r.header("X-Team"), r.header("X-Scheduler-Run-Id"))
        for r in recording_target.received()
    ]
    assert sent == [
        ("Bearer first", "data", str(runs[0].id)),
        ("Bearer second", "ops", str(runs[1].id)),
    ]


async def test_a_templated_header_is_rendered_for_each_call(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    task = http_task(recording_target.url("/"), template=True, headers={"X-Run": "{{ run.id }}"})
    runs = [make_run(task), make_run(task)]

    for run in runs:
        await executor.execute(task, run, None)

    assert [r.header("X-Run") for r in recording_target.received()] == [str(r.id) for r in runs]
