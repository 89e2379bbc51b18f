"""A JSON object that gives a member twice (docs/api.md, "Strict bodies"): Python's and
pydantic's parsers keep the last value, so `{"enabled": false, …, "enabled": true}` once
created an enabled task and silently dropped the first value. Each route that reads a
body now answers 422 naming the member, with nothing written."""

from __future__ import annotations

import json
from typing import Any

from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import assert_problem, cron_task, fields

Client = AsyncTestClient[Any]
URL = "http://127.0.0.1:9/"
JSON_TYPE = {"content-type": "application/json"}


def repeating(data: dict[str, Any], path: list[str | int], member: str, value: Any) -> bytes:
    """`data` as JSON text, the object at `path` ending with `member` once more."""
    text = json.dumps(data)
    inner: Any = data
    for key in path:
        inner = inner[key]
    assert member in inner
    written = json.dumps(inner)
    again = written[:-1] + f", {json.dumps(member)}: {json.dumps(value)}}}"
    assert text.count(written) == 1
    return text.replace(written, again).encode()


async def test_a_member_given_twice_is_a_422_naming_it_and_nothing_is_written(
    api: Client,
) -> None:
    await api.post("/tasks", json=cron_task(URL, name="kept"))
    await api.put("/calendars/office", json={"weekdays": ["SUN"]})
    before = (await api.get("/tasks/kept")).json()
    body = cron_task(URL, name="new") | {"enabled": False}
    spec = {key: value for key, value in body.items() if key != "name"}
    sends = {
        "POST /tasks": ("post", "/tasks", repeating(body, [], "enabled", True), "enabled"),
        "POST /tasks, nested": (
            "post", "/tasks", repeating(body, ["target"], "url", "http://127.0.0.1:8/"),
            "target.url",
        ),
        "PUT /tasks/new": ("put", "/tasks/new", repeating(spec, [], "enabled", True), "enabled"),
        "PATCH /tasks/kept": (
            "patch", "/tasks/kept", repeating({"enabled": False}, [], "enabled", True), "enabled"
        ),
        "apply": (
            "post", "/tasks/apply",
            repeating({"tasks": [body]}, ["tasks", 0], "enabled", True),
            "tasks.0.enabled",
        ),
        "PUT /calendars/office": (
            "put", "/calendars/office",
            repeating({"weekdays": ["SAT"]}, [], "weekdays", ["SUN"]), "weekdays",
        ),
        "pause (no body)": ("post", "/tasks/kept/pause", b'{"a": 1, "a": 2}', "a"),
    }  # fmt: skip
    for route, (method, path, content, field) in sends.items():
        answer = await api.request(method, path, content=content, headers=JSON_TYPE)
        problem = assert_problem(answer, 422)
        assert fields(problem) == [field], (route, problem)
        assert problem["errors"][0]["message"] == (
            "given twice in one object: give each member once"
        ), route
    assert {t["name"] for t in (await api.get("/tasks")).json()["items"]} == {"kept"}
    assert (await api.get("/tasks/kept")).json() == before
    assert (await api.get("/calendars/office")).json()["weekdays"] == ["SUN"]


async def test_the_same_name_in_different_objects_is_no_repeat(api: Client) -> None:
    body = cron_task(URL, name="nested") | {"tags": ["a"]}
    body["target"]["headers"] = {"name": "x"}  # "name" again, in another object
    body["target"]["body"] = {"name": {"name": 1}}
    answer = await api.post("/tasks", json=body)
    assert answer.status_code == 201, answer.text
