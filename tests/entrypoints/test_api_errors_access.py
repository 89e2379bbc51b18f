"""Error table rows 401 and 403 (docs/api.md "Access"): tokens checked, nothing changed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from litestar.testing import AsyncTestClient

from entrypoints.container import build_container
from entrypoints.http.app import create_app
from tests.entrypoints.helpers import Client, assert_problem, cron_task, make_settings
from tests.fixtures.target import RecordingTarget


@pytest.fixture
async def guarded() -> AsyncIterator[Client]:
    app = create_app(build_container(make_settings(api_tokens="admin-token, viewer-token:read")))
    async with AsyncTestClient(app=app) as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    "headers",
    [{}, bearer("wrong-token"), {"Authorization": "Basic YWRtaW4tdG9rZW46"}, bearer("")],
    ids=["missing", "unknown", "not-bearer", "empty"],
)
async def test_without_a_known_token_a_request_is_a_401(
    guarded: Client, headers: dict[str, str]
) -> None:
    response = await guarded.get("/tasks", headers=headers)

    assert_problem(response, 401)
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_a_read_only_token_reads_but_cannot_change(
    guarded: Client, recording_target: RecordingTarget
) -> None:
    created = await guarded.post(
        "/tasks", json=cron_task(recording_target.url()), headers=bearer("admin-token")
    )
    assert created.status_code == 201

    viewer = bearer("viewer-token")
    assert (await guarded.get("/tasks/nightly-report", headers=viewer)).status_code == 200
    assert (await guarded.post("/tasks/nightly-report/dry-run", headers=viewer)).status_code == 200
    preview = {"trigger": {"kind": "interval", "every": 60}, "count": 1}
    assert (
        await guarded.post("/triggers/preview", json=preview, headers=viewer)
    ).status_code == 200
    for method, path in [
        ("POST", "/tasks/nightly-report/pause"),
        ("POST", "/tasks/nightly-report/runs"),
        ("DELETE", "/tasks/nightly-report"),
    ]:
        assert_problem(await guarded.request(method, path, headers=viewer), 403)
    response = await guarded.post(
        "/tasks", json=cron_task(recording_target.url(), "x"), headers=viewer
    )
    assert_problem(response, 403)
    task = (await guarded.get("/tasks/nightly-report", headers=viewer)).json()
    assert task["enabled"] is True and task["version"] == 1


async def test_probes_metrics_and_the_schema_need_no_token(guarded: Client) -> None:
    for path in ("/healthz", "/readyz", "/metrics", "/schema/openapi.json", "/schema"):
        assert (await guarded.get(path)).status_code == 200, path
