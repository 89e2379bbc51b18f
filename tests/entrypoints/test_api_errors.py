"""One test per row of the error table (docs/api.md "Errors" and "Access"): each answers an
RFC 9457 problem, and nothing is written when a request is rejected."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from typing import Any
from uuid import UUID, uuid4

import pytest
from dependency_injector import providers
from litestar.testing import AsyncTestClient

from adapters.memory import InMemoryTaskStore
from application.ports import TaskFilter, TaskPageKey
from domain.errors import StoreUnavailable
from domain.tasks import Task
from entrypoints.container import build_container
from entrypoints.http.app import create_app
from tests.entrypoints.helpers import cron_task, make_settings
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually

Client = AsyncTestClient[Any]
PROBLEM_JSON = "application/problem+json"
SECRET = "s3cret-password"


def assert_problem(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM_JSON)
    problem: dict[str, Any] = response.json()
    assert problem["status"] == status
    assert problem["type"].startswith("urn:imbi-scheduler:problem:")
    assert problem["title"] and problem["detail"]
    return problem


def fields(problem: dict[str, Any]) -> list[str]:
    return [error["field"] for error in problem["errors"]]


async def task_count(client: Client) -> int:
    return len((await client.get("/tasks")).json()["items"])


# -- validation (422) -----------------------------------------------------------------


async def test_bad_cron_expression_names_the_field(
    client: Client, recording_target: RecordingTarget
) -> None:
    body = cron_task(recording_target.url())
    body["trigger"]["expression"] = "61 * * * *"

    problem = assert_problem(await client.post("/tasks", json=body), 422)

    assert fields(problem) == ["trigger.expression"]
    assert "minute" in problem["errors"][0]["message"]
    assert await task_count(client) == 0


async def test_unknown_timezone_names_the_field(
    client: Client, recording_target: RecordingTarget
) -> None:
    body = cron_task(recording_target.url())
    body["trigger"]["timezone"] = "Mars/Olympus_Mons"

    problem = assert_problem(await client.post("/tasks", json=body), 422)

    assert fields(problem) == ["trigger.timezone"]
    assert await task_count(client) == 0


async def test_a_trigger_without_kind_or_an_auth_without_type_names_the_missing_member(
    client: Client, recording_target: RecordingTarget
) -> None:
    body = cron_task(recording_target.url())
    del body["trigger"]["kind"]
    body["target"]["auth"] = {"token_env": "REPORTS_TOKEN"}

    problem = assert_problem(await client.post("/tasks", json=body), 422)

    assert sorted(fields(problem)) == ["target.auth.type", "trigger.kind"]
    assert await task_count(client) == 0


async def test_an_unknown_kind_names_the_kinds_there_are(
    client: Client, recording_target: RecordingTarget
) -> None:
    body = cron_task(recording_target.url())
    body["trigger"]["kind"] = "weekly"

    problem = assert_problem(await client.post("/tasks", json=body), 422)

    assert fields(problem) == ["trigger.kind"]
    assert "'cron', 'interval', 'calendar', 'one_shot'" in problem["errors"][0]["message"]


async def test_unknown_field_is_named_by_its_own_path(
    client: Client, recording_target: RecordingTarget
) -> None:
    body = cron_task(recording_target.url(), enabeld=False)
    body["target"]["timeout"] = 5

    problem = assert_problem(await client.post("/tasks", json=body), 422)

    assert sorted(fields(problem)) == ["enabeld", "target.timeout"]
    assert {error["message"] for error in problem["errors"]} == {"unknown field"}
    assert await task_count(client) == 0


async def test_an_unknown_field_in_a_merge_patch_is_named_and_changes_nothing(
    client: Client, recording_target: RecordingTarget
) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))

    response = await client.patch(
        "/tasks/nightly-report", json={"description": "x", "target": {"retries": 3}}
    )

    assert fields(assert_problem(response, 422)) == ["target.retries"]
    assert (await client.get("/tasks/nightly-report")).json()["version"] == 1


async def test_one_shot_in_the_past_beyond_the_grace_is_rejected(
    client: Client, recording_target: RecordingTarget
) -> None:
    past = (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()
    body = {
        "name": "too-late",
        "trigger": {"kind": "one_shot", "run_at": past},
        "target": {"url": recording_target.url()},
    }

    problem = assert_problem(await client.post("/tasks", json=body), 422)

    assert fields(problem) == ["trigger.run_at"]
    assert await task_count(client) == 0


@pytest.mark.parametrize("limit", ["0", "501", "many"])
async def test_a_limit_outside_1_to_500_is_rejected(client: Client, limit: str) -> None:
    problem = assert_problem(await client.get("/tasks", params={"limit": limit}), 422)

    assert fields(problem) == ["limit"]


async def test_a_limit_outside_1_to_500_is_rejected_on_run_history(
    client: Client, recording_target: RecordingTarget
) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))

    response = await client.get("/tasks/nightly-report/runs", params={"limit": "501"})

    assert fields(assert_problem(response, 422)) == ["limit"]


async def test_a_cursor_this_service_did_not_issue_is_rejected(client: Client) -> None:
    problem = assert_problem(await client.get("/tasks", params={"cursor": "not-a-cursor"}), 422)

    assert fields(problem) == ["cursor"]


async def test_preview_of_a_bad_trigger_names_the_field(client: Client) -> None:
    body = {"trigger": {"kind": "interval", "every": 0}, "count": 3}

    problem = assert_problem(await client.post("/triggers/preview", json=body), 422)

    assert fields(problem) == ["trigger.every"]


async def test_preview_after_an_instant_that_overflows_in_utc_names_after(client: Client) -> None:
    # Year 1 at +13:12 is before year 1 in UTC (found by Schemathesis: a 500 before).
    trigger = {"kind": "cron", "expression": "* * * * *"}
    body = {"trigger": trigger, "count": 3, "after": "0001-01-01T00:00:00+13:12"}

    problem = assert_problem(await client.post("/triggers/preview", json=body), 422)

    assert fields(problem) == ["after"]


async def test_a_patch_that_makes_the_task_invalid_changes_nothing(
    client: Client, recording_target: RecordingTarget
) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))

    response = await client.patch(
        "/tasks/nightly-report", json={"trigger": {"kind": "cron", "expression": "0 0 30 2 *"}}
    )

    assert fields(assert_problem(response, 422)) == ["trigger.expression"]
    task = (await client.get("/tasks/nightly-report")).json()
    assert task["version"] == 1 and task["trigger"]["expression"] == "30 2 * * *"


async def test_a_patch_that_is_not_an_object_is_rejected(
    client: Client, recording_target: RecordingTarget
) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))

    response = await client.patch("/tasks/nightly-report", json=["enabled", False])

    assert fields(assert_problem(response, 422)) == ["body"]


async def test_a_missing_body_is_rejected(client: Client) -> None:
    problem = assert_problem(await client.post("/tasks"), 422)

    assert fields(problem) == ["body"]


# -- malformed requests (400, 415) -----------------------------------------------------


async def test_malformed_json_is_a_400_that_says_so(client: Client) -> None:
    response = await client.post(
        "/tasks", content=b'{"name": "x",', headers={"Content-Type": "application/json"}
    )

    assert "not valid JSON" in assert_problem(response, 400)["detail"]
    assert await task_count(client) == 0


async def test_a_body_that_is_not_json_is_a_415(
    client: Client, recording_target: RecordingTarget
) -> None:
    response = await client.post(
        "/tasks", content=b"name=x", headers={"Content-Type": "application/x-www-form-urlencoded"}
    )

    assert "application/json" in assert_problem(response, 415)["detail"]


# -- conflicts and preconditions (409, 412) -------------------------------------------


async def test_a_duplicate_name_is_a_409(client: Client, recording_target: RecordingTarget) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))

    response = await client.post("/tasks", json=cron_task(recording_target.url()))

    assert "nightly-report" in assert_problem(response, 409)["detail"]
    assert await task_count(client) == 1


async def test_a_rename_onto_an_existing_name_is_a_409(
    client: Client, recording_target: RecordingTarget
) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))
    await client.post("/tasks", json=cron_task(recording_target.url(), "other"))

    response = await client.patch("/tasks/other", json={"name": "nightly-report"})

    assert_problem(response, 409)


@pytest.mark.parametrize("if_match", ['"1"', "1", 'W/"1"', '"abc"', '"1", "2"'])
async def test_a_stale_if_match_is_a_412_and_changes_nothing(
    client: Client, recording_target: RecordingTarget, if_match: str
) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))
    await client.patch("/tasks/nightly-report", json={"description": "v2"})

    response = await client.patch(
        "/tasks/nightly-report", json={"description": "v3"}, headers={"If-Match": if_match}
    )

    assert_problem(response, 412)
    task = (await client.get("/tasks/nightly-report")).json()
    assert task["version"] == 2 and task["description"] == "v2"


async def test_cancel_of_a_finished_run_is_a_409(
    client: Client, recording_target: RecordingTarget
) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))
    run = (await client.post("/tasks/nightly-report/runs")).json()

    async def finished() -> bool:
        return bool((await client.get(f"/runs/{run['id']}")).json()["status"] != "running")

    await eventually(finished)

    response = await client.post(f"/runs/{run['id']}/cancel")

    assert "succeeded" in assert_problem(response, 409)["detail"]


# -- unknown resources (404) -----------------------------------------------------------


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
    ],
)
async def test_an_unknown_task_run_or_route_is_a_404(
    client: Client, method: str, path: str
) -> None:
    body = {"description": "x"} if method == "PATCH" else None

    response = await client.request(method, path, json=body)

    assert_problem(response, 404)


async def test_a_method_the_route_does_not_take_is_a_405(client: Client) -> None:
    assert_problem(await client.put("/tasks", json={}), 405)


# -- access (401, 403) -------------------------------------------------------------------


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


# -- failures of the service (500, 503) -------------------------------------------------


class BrokenStore(InMemoryTaskStore):
    """A store whose reads fail: `get_task` with an unexpected error that carries SQL and
    a secret, `list_tasks` and `ping` as an outage."""

    async def get_task(self, task_id: UUID) -> Task:
        raise RuntimeError(f"SELECT * FROM scheduler.tasks WHERE password = '{SECRET}'")

    async def get_task_by_name(self, name: str) -> Task:
        raise RuntimeError(f"SELECT * FROM scheduler.tasks WHERE password = '{SECRET}'")

    async def list_tasks(
        self, task_filter: TaskFilter, after: TaskPageKey | None, limit: int
    ) -> list[Task]:
        raise StoreUnavailable()

    async def ping(self) -> None:
        raise StoreUnavailable()


@pytest.fixture
async def broken() -> AsyncIterator[Client]:
    container = build_container(make_settings())
    container.memory_store.override(providers.Singleton(BrokenStore))
    async with AsyncTestClient(app=create_app(container, run_engine=False)) as client:
        yield client


async def test_an_internal_error_is_a_500_that_leaks_nothing_but_is_logged(
    broken: Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        response = await broken.get("/tasks/nightly-report")

    problem = assert_problem(response, 500)
    assert SECRET not in response.text and "SELECT" not in response.text
    assert "Traceback" not in response.text and "RuntimeError" not in response.text
    assert set(problem) == {"type", "title", "status", "detail"}
    assert any(SECRET in (record.exc_text or "") for record in caplog.records)


async def test_a_store_outage_is_a_503_with_retry_after(broken: Client) -> None:
    response = await broken.get("/tasks")

    assert_problem(response, 503)
    assert response.headers["retry-after"] == "5"


async def test_readiness_fails_while_the_store_is_unreachable(broken: Client) -> None:
    problem = assert_problem(await broken.get("/readyz"), 503)

    assert problem["checks"]["store"].startswith("unavailable")
    assert (await broken.get("/healthz")).status_code == 200


async def test_readiness_fails_when_the_engine_is_not_running() -> None:
    container = build_container(make_settings())
    app = create_app(container)
    async with AsyncTestClient(app=app) as client:
        await eventually(lambda: _status(client, "/readyz", 200))
        # The app and its engine run on the test client's own event loop.
        client.blocking_portal.call(container.engine().stop)

        problem = assert_problem(await client.get("/readyz"), 503)

    assert problem["checks"] == {"store": "ok", "engine": "not running"}


async def _status(client: Client, path: str, status: int) -> bool:
    return (await client.get(path)).status_code == status


async def test_fire_now_at_max_running_instances_records_and_counts_a_skipped_run(
    client: Client, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/hang", Response(delay=30))
    await client.post("/tasks", json=cron_task(recording_target.url("/hang")))
    await client.post("/tasks/nightly-report/runs")

    # A run in flight holds the only slot: a second fire now is recorded, not called.
    response = await client.post("/tasks/nightly-report/runs")

    assert response.status_code == 202
    assert response.json()["status"] == "skipped"
    metrics = (await client.get("/metrics")).text
    assert 'scheduler_runs_total{status="skipped"} 1.0' in metrics
