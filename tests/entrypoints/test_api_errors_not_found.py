"""Error table rows 404 and 405 (docs/api.md "Errors"): unknown tasks, runs, routes, methods."""

from __future__ import annotations

from uuid import uuid4

import pytest

from tests.entrypoints.helpers import Client, assert_problem


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/tasks/no-such-task"),
        ("GET", f"/tasks/{uuid4()}"),
        ("PATCH", "/tasks/no-such-task"),
        ("DELETE", "/tasks/no-such-task"),
        ("POST", "/tasks/no-such-task/pause"),
        ("POST", "/tasks/no-such-task/resume"),
        ("POST", "/tasks/no-such-task/dry-run"),
        ("POST", "/tasks/no-such-task/runs"),
        ("GET", "/tasks/no-such-task/runs"),
        ("GET", "/tasks/no-such-task/upcoming"),
        ("GET", f"/runs/{uuid4()}"),
        ("GET", "/runs/not-a-uuid"),
        ("POST", f"/runs/{uuid4()}/cancel"),
        ("GET", "/no/such/route"),
        # Litestar's own HTML page once, as for the UIs this server does not serve.
        ("GET", "/schema/nope"),
        ("GET", "/schema/redoc"),
        ("GET", "/schema/rapidoc"),
        ("GET", "/schema/openapi.yaml"),
    ],
)
async def test_an_unknown_task_run_or_route_is_a_404(
    client: Client, method: str, path: str
) -> None:
    body = {"description": "x"} if method == "PATCH" else None

    response = await client.request(method, path, json=body)

    assert_problem(response, 404)


async def test_the_documented_schema_routes_still_answer(client: Client) -> None:
    for path in ("/schema", "/schema/swagger"):
        page = await client.get(path)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert (await client.get("/schema/openapi.json")).json()["openapi"].startswith("3.1")


async def test_a_method_the_route_does_not_take_is_a_405(client: Client) -> None:
    assert_problem(await client.put("/tasks", json={}), 405)
