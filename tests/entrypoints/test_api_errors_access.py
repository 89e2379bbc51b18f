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


async def test_a_read_only_token_may_ask_for_an_applys_dry_run_only(
    guarded: Client, recording_target: RecordingTarget
) -> None:
    # What a reviewer reads before a deploy, with a token that cannot deploy.
    body = {"tasks": [{"name": "from-file", **cron_task(recording_target.url(), "from-file")}]}
    viewer = bearer("viewer-token")

    dry = await guarded.post("/tasks/apply", json={**body, "dry_run": True}, headers=viewer)
    real = await guarded.post("/tasks/apply", json=body, headers=viewer)
    spelled = await guarded.post("/tasks/apply", json={**body, "dry_run": "true"}, headers=viewer)

    assert dry.status_code == 200, dry.text
    assert dry.json()["created"] == ["from-file"]
    assert "dry run" in assert_problem(real, 403)["detail"]
    assert_problem(spelled, 403)  # only the JSON true asks for a dry run
    listed = await guarded.get("/tasks", headers=viewer)
    assert listed.json()["items"] == []  # nothing written
    admin = await guarded.post("/tasks/apply", json=body, headers=bearer("admin-token"))
    assert admin.status_code == 200 and admin.json()["created"] == ["from-file"]
