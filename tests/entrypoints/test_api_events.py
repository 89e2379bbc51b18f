"""Events through the API: the task field `notify` (validated, stored, returned,
patched), events delivered signed to a real local receiver by the running service,
`GET /events` and the event metrics (docs/api.md, "Events")."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from standardwebhooks.webhooks import Webhook

from entrypoints.container import build_container
from entrypoints.http.app import create_app
from tests.entrypoints.helpers import cron_task, make_settings
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually

Client = AsyncTestClient[Any]
SECRET = "whsec_" + base64.b64encode(b"events-api-test-signing-key-32b!").decode()
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture
async def signed_client(recording_target: RecordingTarget) -> AsyncIterator[Client]:
    """The API on a memory store, engine and event sender running, calls signed,
    every task's events to the recording target's /all unless its notify says."""
    settings = make_settings(
        signing_secret=SECRET,
        events_url=recording_target.url("/all"),
        events_poll_interval=0.05,
    )
    async with AsyncTestClient(app=create_app(build_container(settings))) as client:
        yield client


# -- the notify field --------------------------------------------------------------------


async def test_notify_is_stored_returned_and_defaults_to_every_event(
    client: Client, recording_target: RecordingTarget
) -> None:
    body = cron_task(recording_target.url("/job"), notify={"url": recording_target.url("/team")})
    created = await client.post("/tasks", json=body)
    assert created.status_code == 201, created.text
    notify = created.json()["notify"]
    assert notify["url"] == recording_target.url("/team")
    assert notify["events"] == [
        "run.failed",
        "run.missed",
        "run.skipped",
        "task.auto_paused",
        "task.recovered",
        "backfill.finished",
    ]
    assert notify["auth"] == {"type": "none"}
    assert (await client.get("/tasks/nightly-report")).json()["notify"] == notify
    plain = await client.post("/tasks", json=cron_task(recording_target.url(), name="plain"))
    assert plain.json()["notify"] is None


async def test_notify_is_patched_by_merge_and_removed_with_null(
    client: Client, recording_target: RecordingTarget
) -> None:
    body = cron_task(recording_target.url("/job"), notify={"url": recording_target.url("/team")})
    await client.post("/tasks", json=body)

    patched = await client.patch(
        "/tasks/nightly-report",
        json={
            "notify": {
                "events": ["task.auto_paused"],
                "auth": {"type": "bearer", "token_env": "TEAM_TOKEN"},
            }
        },
        headers=MERGE,
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["notify"]["events"] == ["task.auto_paused"]
    assert patched.json()["notify"]["url"] == recording_target.url("/team")
    assert patched.json()["notify"]["auth"] == {"type": "bearer", "token_env": "TEAM_TOKEN"}

    removed = await client.patch("/tasks/nightly-report", json={"notify": None}, headers=MERGE)
    assert removed.json()["notify"] is None


@pytest.mark.parametrize(
    ("notify", "field"),
    [
        ({"url": "ftp://example.test/"}, "notify.url"),
        ({"url": "http://t.test/", "events": ["run.exploded"]}, "notify.events.0"),
        ({"url": "http://t.test/", "events": []}, "notify.events"),
        ({"url": "http://t.test/", "events": ["run.failed", "run.failed"]}, "notify.events"),
        ({"url": "http://t.test/", "headers_env": {"X-Key": "not a name"}}, "notify.headers_env"),
        ({"url": "http://t.test/", "colour": "red"}, "notify.colour"),
        ({"events": ["run.failed"]}, "notify.url"),
        ("http://t.test/", "notify"),
    ],
)
async def test_a_bad_notify_is_a_422_naming_the_field(
    client: Client, recording_target: RecordingTarget, notify: Any, field: str
) -> None:
    response = await client.post("/tasks", json=cron_task(recording_target.url(), notify=notify))
    assert response.status_code == 422, response.text
    fields = [error["field"] for error in response.json()["errors"]]
    assert any(f.startswith(field) for f in fields), fields
    assert (await client.get("/tasks")).json()["items"] == []


async def test_a_notify_url_the_outbound_guard_denies_is_a_422(
    client: Client, recording_target: RecordingTarget
) -> None:
    metadata = {"url": "http://169.254.169.254/latest/"}
    response = await client.post("/tasks", json=cron_task(recording_target.url(), notify=metadata))
    assert response.status_code == 422, response.text
    assert [e["field"] for e in response.json()["errors"]] == ["notify.url"]

    await client.post("/tasks", json=cron_task(recording_target.url()))
    patched = await client.patch("/tasks/nightly-report", json={"notify": metadata}, headers=MERGE)
    assert patched.status_code == 422, patched.text
    assert [e["field"] for e in patched.json()["errors"]] == ["notify.url"]
    assert (await client.get("/tasks/nightly-report")).json()["notify"] is None


# -- delivery by the running service -------------------------------------------------------


async def test_a_failed_run_is_delivered_signed_to_the_tasks_notify_url(
    signed_client: Client, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/job", Response(status=500, body=b"down"))
    body = cron_task(recording_target.url("/job"), notify={"url": recording_target.url("/team")})
    task = (await signed_client.post("/tasks", json=body)).json()
    run = (await signed_client.post(f"/tasks/{task['id']}/runs")).json()

    [received] = await eventually(lambda: _received(recording_target, "/team"))
    payload = Webhook(SECRET).verify(received.body, received.headers)
    assert payload["type"] == "run.failed"
    assert payload["data"]["task"] == {"id": task["id"], "name": "nightly-report"}
    assert payload["data"]["run"]["id"] == run["id"]
    assert payload["data"]["run"]["status"] == "failed"
    assert received.header("webhook-id") == payload["data"]["event_id"]
    assert recording_target.received("/all") == []  # notify replaces the global URL

    sent = await eventually(lambda: _listed(signed_client, "sent"))
    [event] = sent["items"]
    assert event["id"] == payload["data"]["event_id"]
    assert (event["type"], event["status"], event["attempts"]) == ("run.failed", "sent", 1)
    assert event["url"] == recording_target.url("/team")
    assert event["payload"] == payload
    metrics = (await signed_client.get("/metrics")).text
    assert 'scheduler_events_total{outcome="sent",type="run.failed"} 1.0' in metrics


async def test_without_notify_events_go_to_the_global_url(
    signed_client: Client, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/job", Response(status=503))
    task = (await signed_client.post("/tasks", json=cron_task(recording_target.url("/job")))).json()
    await signed_client.post(f"/tasks/{task['id']}/runs")

    [received] = await eventually(lambda: _received(recording_target, "/all"))
    assert Webhook(SECRET).verify(received.body, received.headers)["type"] == "run.failed"


async def test_an_event_the_receiver_refuses_stays_pending_for_a_retry(
    signed_client: Client, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/job", Response(status=500))
    recording_target.respond("/all", Response(status=503))
    task = (await signed_client.post("/tasks", json=cron_task(recording_target.url("/job")))).json()
    await signed_client.post(f"/tasks/{task['id']}/runs")

    await eventually(lambda: _received(recording_target, "/all"))
    pending = await eventually(lambda: _attempted(signed_client))
    assert pending["http_status"] == 503 and pending["last_error"]
    assert pending["next_attempt_at"] is not None
    # Kept to the microsecond, answered as every instant is: UTC, whole seconds.
    for name in ("created_at", "next_attempt_at", "deadline"):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", pending[name]), pending
    metrics = (await signed_client.get("/metrics")).text
    assert 'scheduler_events_total{outcome="retried",type="run.failed"} 1.0' in metrics


async def test_the_event_listing_pages_with_a_cursor_and_refuses_a_bad_one(
    signed_client: Client, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/job", Response(status=500))
    task = (await signed_client.post("/tasks", json=cron_task(recording_target.url("/job")))).json()
    for _ in range(3):
        await signed_client.post(f"/tasks/{task['id']}/runs")
    await eventually(lambda: _count(signed_client, 3))

    first = (await signed_client.get("/events", params={"limit": 2})).json()
    rest = (
        await signed_client.get("/events", params={"limit": 2, "cursor": first["next_cursor"]})
    ).json()
    ids = [e["id"] for e in first["items"] + rest["items"]]
    assert len(ids) == len(set(ids)) == 3 and rest["next_cursor"] is None

    bad = await signed_client.get("/events", params={"cursor": "not-a-cursor"})
    assert bad.status_code == 422
    assert [e["field"] for e in bad.json()["errors"]] == ["cursor"]
    # The cursor carries the listing's status: the same one may be sent beside it, not
    # another one, which would list by the cursor's while the caller believes otherwise.
    cursor = first["next_cursor"]
    pending = await signed_client.get("/events", params={"cursor": cursor, "status": "pending"})
    assert pending.status_code == 422
    assert [e["field"] for e in pending.json()["errors"]] == ["status"]
    assert "'pending' but the cursor was issued for no filter" in pending.text
    wrong = await signed_client.get("/events", params={"status": "lost"})
    assert wrong.status_code in (400, 422)


async def _received(target: RecordingTarget, path: str) -> list[Any]:
    return target.received(path)


async def _listed(client: Client, status: str) -> dict[str, Any] | None:
    page: dict[str, Any] = (await client.get("/events", params={"status": status})).json()
    return page if page["items"] else None


async def _attempted(client: Client) -> dict[str, Any] | None:
    page = (await client.get("/events", params={"status": "pending"})).json()
    tried = [e for e in page["items"] if e["attempts"] >= 1 and e["http_status"] is not None]
    return tried[0] if tried else None


async def _count(client: Client, n: int) -> bool:
    page = (await client.get("/events", params={"limit": 500})).json()
    return len(page["items"]) >= n
