"""One happy path per route of docs/api.md ("Endpoints"), through the app on the in-memory store."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import cron_task
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually

Client = AsyncTestClient[Any]
API_MD_DEFAULTS: dict[str, Any] = {
    "description": None,
    "enabled": True,
    "tags": [],
    "misfire_grace_seconds": 60,
    "max_running_instances": 1,
    "jitter_seconds": 0,
    "pause_after_failures": None,
    "catch_up": "latest",
    "max_catch_up": 100,
    "overlap": "skip",
    "consecutive_failures": 0,
    "last_run_at": None,
    "version": 1,
}
TARGET_DEFAULTS = {
    "method": "POST",
    "headers": {},
    "body": None,
    "timeout_seconds": 30,
    "auth": {"type": "none"},
    "retry": {"max_attempts": 1, "backoff_seconds": 1, "max_backoff_seconds": 60},
    "template": False,
}


async def create(client: Client, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/tasks", json=body)
    assert response.status_code == 201, response.text
    task: dict[str, Any] = response.json()
    return task


async def finished_run(client: Client, run_id: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        run: dict[str, Any] = (await client.get(f"/runs/{run_id}")).json()
        return run if run["status"] != "running" else None

    return await eventually(probe)


async def test_create_answers_201_with_location_etag_and_the_defaults(
    client: Client, recording_target: RecordingTarget
) -> None:
    response = await client.post("/tasks", json=cron_task(recording_target.url("/report")))

    assert response.status_code == 201
    task = response.json()
    assert response.headers["location"] == f"/tasks/{task['id']}"
    assert response.headers["etag"] == '"1"'
    assert {key: task[key] for key in API_MD_DEFAULTS} == API_MD_DEFAULTS
    assert {key: task["target"][key] for key in TARGET_DEFAULTS} == TARGET_DEFAULTS
    assert task["trigger"]["expression"] == "30 2 * * *"
    assert task["next_run_at"].endswith("Z") and task["created_at"].endswith("Z")
    assert "next_fire_at" not in task


async def test_read_by_id_and_by_name(client: Client, recording_target: RecordingTarget) -> None:
    task = await create(client, cron_task(recording_target.url()))

    by_id = await client.get(f"/tasks/{task['id']}")
    by_name = await client.get("/tasks/nightly-report")

    assert by_id.status_code == by_name.status_code == 200
    assert by_id.json() == by_name.json() == task
    assert by_name.headers["etag"] == '"1"'


async def test_list_filters_and_pages_through_every_task_once(
    client: Client, recording_target: RecordingTarget
) -> None:
    for i in range(5):
        await create(
            client,
            cron_task(recording_target.url(), f"job-{i}", tags=["even" if i % 2 == 0 else "odd"]),
        )
    await create(client, cron_task(recording_target.url(), "other", enabled=False))

    seen, cursor = [], None
    while True:
        params: dict[str, Any] = {"limit": 2, "name": "job-"}
        if cursor:
            params = {"limit": 2, "cursor": cursor}
        page = (await client.get("/tasks", params=params)).json()
        seen += [task["name"] for task in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    even = (await client.get("/tasks", params={"tag": "even"})).json()
    disabled = (await client.get("/tasks", params={"enabled": "false"})).json()

    # Ordered by (created_at, id): tasks created within one second come in id order.
    assert sorted(seen) == [f"job-{i}" for i in range(5)]
    assert sorted(task["name"] for task in even["items"]) == ["job-0", "job-2", "job-4"]
    assert even["next_cursor"] is None
    assert [task["name"] for task in disabled["items"]] == ["other"]


async def test_merge_patch_merges_objects_replaces_trigger_and_auth_whole_and_resets_nulls(
    client: Client, recording_target: RecordingTarget
) -> None:
    task = await create(
        client,
        cron_task(
            recording_target.url(),
            description="old",
            target={
                "url": recording_target.url(),
                "headers": {"X-Team": "data"},
                "auth": {"type": "basic", "username": "u", "password_env": "PASSWORD"},
            },
        ),
    )
    patch = {
        "description": None,
        "trigger": {"kind": "interval", "every": "PT15M"},
        "target": {"headers": {"X-Env": "prod"}, "auth": {"type": "bearer", "token_env": "TOKEN"}},
        "tags": ["reports"],
    }

    response = await client.patch(
        f"/tasks/{task['id']}",
        json=patch,
        headers={"Content-Type": "application/merge-patch+json", "If-Match": '"1"'},
    )

    assert response.status_code == 200, response.text
    changed = response.json()
    assert response.headers["etag"] == '"2"' and changed["version"] == 2
    assert changed["description"] is None
    assert changed["tags"] == ["reports"]
    assert changed["target"]["headers"] == {"X-Team": "data", "X-Env": "prod"}
    assert changed["target"]["auth"] == {"type": "bearer", "token_env": "TOKEN"}
    assert changed["trigger"]["kind"] == "interval" and changed["trigger"]["every"] == 900
    assert "expression" not in changed["trigger"]


async def test_patch_accepts_plain_json(client: Client, recording_target: RecordingTarget) -> None:
    task = await create(client, cron_task(recording_target.url()))

    response = await client.patch(f"/tasks/{task['name']}", json={"jitter_seconds": 5})

    assert response.status_code == 200
    assert response.json()["jitter_seconds"] == 5


async def test_pause_and_resume(client: Client, recording_target: RecordingTarget) -> None:
    task = await create(client, cron_task(recording_target.url()))

    paused = await client.post(f"/tasks/{task['id']}/pause")
    resumed = await client.post(f"/tasks/{task['id']}/resume")

    assert paused.status_code == resumed.status_code == 200
    assert paused.json()["enabled"] is False and paused.json()["next_run_at"] is None
    assert paused.headers["etag"] == '"2"'
    assert resumed.json()["enabled"] is True and resumed.json()["next_run_at"] is not None


WHOLE_SECOND = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


async def test_every_instant_of_a_finished_run_is_in_whole_seconds(
    client: Client, recording_target: RecordingTarget
) -> None:
    task = await create(client, cron_task(recording_target.url()))
    run = (await client.post(f"/tasks/{task['id']}/runs")).json()

    finished = await finished_run(client, run["id"])

    instants = {
        name: finished[name]
        for name in ("scheduled_for", "claimed_at", "started_at", "finished_at")
    }
    assert all(WHOLE_SECOND.fullmatch(value) for value in instants.values()), instants
    assert instants["started_at"] <= instants["finished_at"]


async def test_delete_keeps_the_runs_readable(
    client: Client, recording_target: RecordingTarget
) -> None:
    task = await create(client, cron_task(recording_target.url()))
    run = (await client.post(f"/tasks/{task['id']}/runs")).json()
    await finished_run(client, run["id"])

    deleted = await client.delete(f"/tasks/{task['id']}")

    assert deleted.status_code == 204 and deleted.content == b""
    assert (await client.get(f"/tasks/{task['id']}")).status_code == 404
    assert (await client.get(f"/runs/{run['id']}")).status_code == 200


async def test_dry_run_renders_every_header_with_secrets_redacted(
    client: Client, recording_target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPORTS_TOKEN", "s3cret")
    body = cron_task(
        recording_target.url("/run"),
        target={
            "url": recording_target.url("/run"),
            "headers": {"X-Team": "data"},
            "body": {"any": "json"},
            "auth": {"type": "bearer", "token_env": "REPORTS_TOKEN"},
        },
    )
    task = await create(client, body)

    response = await client.post(f"/tasks/{task['id']}/dry-run")

    assert response.status_code == 200
    rendered = response.json()
    headers = {name.lower(): value for name, value in rendered["headers"].items()}
    assert rendered["method"] == "POST" and rendered["url"] == recording_target.url("/run")
    assert rendered["body"] == {"any": "json"}
    assert headers["x-team"] == "data"
    assert headers["authorization"] == "Bearer ***"
    assert headers["idempotency-key"].startswith(task["id"])
    assert "s3cret" not in response.text
    assert recording_target.received() == []


async def test_dry_run_of_a_task_with_no_next_occurrence_shows_a_manual_runs_call(
    client: Client, recording_target: RecordingTarget
) -> None:
    # Paused, it can only run by hand: its key is a manual run's, never an occurrence's.
    task = await create(client, cron_task(recording_target.url("/run"), enabled=False))

    rendered = (await client.post(f"/tasks/{task['id']}/dry-run")).json()

    headers = {name.lower(): value for name, value in rendered["headers"].items()}
    assert headers["idempotency-key"] == f"{task['id']}:{headers['x-scheduler-run-id']}"
    assert recording_target.received() == []


async def test_fire_now_calls_the_target_and_records_a_manual_run(
    client: Client, recording_target: RecordingTarget
) -> None:
    task = await create(client, cron_task(recording_target.url("/now"), enabled=False))

    response = await client.post(f"/tasks/{task['id']}/runs")

    assert response.status_code == 202
    run = response.json()
    assert response.headers["location"] == f"/runs/{run['id']}"
    assert run["manual"] is True and run["task_id"] == task["id"]
    finished = await finished_run(client, run["id"])
    assert finished["status"] == "succeeded" and finished["http_status"] == 200
    assert recording_target.received("/now")[0].header("X-Scheduler-Run-Id") == run["id"]


async def test_history_is_newest_first_paged_and_filtered(
    client: Client, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/flaky", Response(200), Response(500), Response(200))
    task = await create(client, cron_task(recording_target.url("/flaky"), max_running_instances=5))
    run_ids = []
    for _ in range(3):
        run = (await client.post(f"/tasks/{task['id']}/runs")).json()
        await finished_run(client, run["id"])
        run_ids.append(run["id"])

    first = (await client.get(f"/tasks/{task['id']}/runs", params={"limit": 2})).json()
    second = (
        await client.get(
            f"/tasks/{task['id']}/runs", params={"limit": 2, "cursor": first["next_cursor"]}
        )
    ).json()
    failed = (await client.get(f"/tasks/{task['name']}/runs", params={"status": "failed"})).json()

    listed = [run["id"] for run in first["items"] + second["items"]]
    assert sorted(listed) == sorted(run_ids) and len(set(listed)) == 3
    assert second["next_cursor"] is None
    instants = [run["scheduled_for"] for run in first["items"] + second["items"]]
    assert instants == sorted(instants, reverse=True)
    assert [run["id"] for run in failed["items"]] == [run_ids[1]]


async def test_read_one_run(client: Client, recording_target: RecordingTarget) -> None:
    task = await create(client, cron_task(recording_target.url()))
    run = (await client.post(f"/tasks/{task['id']}/runs")).json()

    response = await client.get(f"/runs/{run['id']}")

    assert response.status_code == 200
    assert response.json()["id"] == run["id"]
    assert set(response.json()) >= {
        "id", "task_id", "scheduled_for", "coalesced", "claimed_at", "started_at",
        "finished_at", "lease_expires_at", "status", "manual", "attempts", "http_status",
        "response_excerpt", "error", "replica",
    }  # fmt: skip


async def test_cancel_a_running_run(client: Client, recording_target: RecordingTarget) -> None:
    recording_target.respond("/slow", Response(delay=30))
    task = await create(client, cron_task(recording_target.url("/slow")))
    run = (await client.post(f"/tasks/{task['id']}/runs")).json()
    await eventually(lambda: _received(recording_target, "/slow"))

    response = await client.post(f"/runs/{run['id']}/cancel")

    assert response.status_code == 202
    assert response.json()["id"] == run["id"]
    assert (await finished_run(client, run["id"]))["status"] == "cancelled"


async def _received(target: RecordingTarget, path: str) -> bool:
    return bool(target.received(path))


async def test_upcoming_lists_the_next_fire_times(
    client: Client, recording_target: RecordingTarget
) -> None:
    task = await create(client, cron_task(recording_target.url()))

    response = await client.get(f"/tasks/{task['id']}/upcoming", params={"count": 3})

    assert response.status_code == 200
    times = response.json()["fire_times"]
    assert len(times) == 3 and times[0] == task["next_run_at"]
    assert all(time.endswith(":30:00Z") for time in times)


async def test_preview_lists_fire_times_without_creating_anything(client: Client) -> None:
    body = {
        "trigger": {"kind": "cron", "expression": "30 2 * * *", "timezone": "America/New_York"},
        "count": 3,
        "after": "2026-03-07T00:00:00Z",
    }

    response = await client.post("/triggers/preview", json=body)

    assert response.status_code == 200
    # 2026-03-08 02:30 does not exist in New York: it fires at 03:30 EDT (07:30 UTC).
    assert response.json() == {
        "fire_times": ["2026-03-07T07:30:00Z", "2026-03-08T07:30:00Z", "2026-03-09T06:30:00Z"]
    }
    assert (await client.get("/tasks")).json()["items"] == []


async def test_preview_of_a_one_shot_whose_time_passed_lists_that_time(client: Client) -> None:
    """Without `after`, a one-shot previews its fire time even when it has passed (the
    task's grace rule is not the trigger's, docs/api.md); strictly after a later `after`,
    it has none."""
    passed = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=30)
    trigger = {"kind": "one_shot", "run_at": passed.replace(tzinfo=None).isoformat()}
    trigger["timezone"] = "UTC"
    stamp = passed.isoformat().replace("+00:00", "Z")

    listed = await client.post("/triggers/preview", json={"trigger": trigger})
    later = await client.post("/triggers/preview", json={"trigger": trigger, "after": stamp})

    assert listed.status_code == 200 and listed.json() == {"fire_times": [stamp]}
    assert later.status_code == 200 and later.json() == {"fire_times": []}


async def test_health_readiness_and_metrics(client: Client) -> None:
    health = await client.get("/healthz")
    ready = await client.get("/readyz")
    metrics = await client.get("/metrics")

    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "checks": {"store": "ok", "engine": "ok"}}
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain")
    for name in (
        "scheduler_runs_total",
        "scheduler_fire_lateness_seconds",
        "scheduler_claim_batch_duration_seconds",
        "scheduler_runs_in_flight",
        "scheduler_store_errors_total",
    ):
        assert f"# TYPE {name.removesuffix('_total')}" in metrics.text


async def test_metrics_count_runs_by_status(
    client: Client, recording_target: RecordingTarget
) -> None:
    task = await create(client, cron_task(recording_target.url()))
    run = (await client.post(f"/tasks/{task['id']}/runs")).json()
    await finished_run(client, run["id"])

    async def counted() -> bool:
        text = (await client.get("/metrics")).text
        return 'scheduler_runs_total{status="succeeded"} 1.0' in text

    await eventually(counted)
