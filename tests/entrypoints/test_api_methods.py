"""What `OPTIONS` and a 405 say a path serves (docs/api.md, "Methods"), on both stores: an
outside audit found `OPTIONS /tasks` answering `OPTIONS, POST` (GET missing), a 405's
`Allow` in an order that changed from run to run, and `HEAD /healthz` a 405."""

from __future__ import annotations

import re
from typing import Any

from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import assert_problem, cron_task
from tests.fixtures.waiting import eventually

Client = AsyncTestClient[Any]
URL = "http://127.0.0.1:9/"
PROBES = {"/healthz", "/readyz"}


def allowed(answer: Any) -> list[str]:
    header: str = answer.headers["allow"]
    return header.split(", ")


async def test_options_lists_every_method_of_every_path_in_the_document(api: Client) -> None:
    document = (await api.get("/schema/openapi.json")).json()
    for template, item in document["paths"].items():
        path = re.sub(r"\{[^}]+\}", "x", template)
        served = {method.upper() for method in item} | {"OPTIONS"}
        if template in PROBES:
            served.add("HEAD")
        answer = await api.options(path)
        assert answer.status_code == 204, (path, answer.text)
        assert allowed(answer) == sorted(served), path


async def test_a_405_lists_the_same_methods_sorted(api: Client) -> None:
    await api.post("/tasks", json=cron_task(URL, name="t1"))
    for method, path, served in [
        ("PUT", "/tasks", ["GET", "OPTIONS", "POST"]),
        ("DELETE", "/tasks", ["GET", "OPTIONS", "POST"]),
        ("POST", "/tasks/t1", ["DELETE", "GET", "OPTIONS", "PATCH", "PUT"]),
        ("GET", "/tasks/t1/pause", ["OPTIONS", "POST"]),
        ("PATCH", "/calendars", ["GET", "OPTIONS", "POST"]),
        ("POST", "/healthz", ["GET", "HEAD", "OPTIONS"]),
        ("HEAD", "/tasks", ["GET", "OPTIONS", "POST"]),
    ]:
        answer = await api.request(method, path)
        assert answer.status_code == 405, (method, path)
        assert allowed(answer) == served, (method, path)
        if method != "HEAD":
            assert_problem(answer, 405)
        options = await api.options(path)
        assert allowed(options) == served, path


async def test_the_probes_answer_head_with_the_status_of_get_and_no_body(api: Client) -> None:
    async def ready() -> bool:
        return (await api.get("/readyz")).status_code == 200

    await eventually(ready, "the engine started")  # /readyz is 503 until then
    for path in PROBES:
        answer = await api.head(path)
        assert answer.status_code == 200, path
        assert answer.content == b""
