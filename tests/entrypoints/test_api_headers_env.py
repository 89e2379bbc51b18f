"""`target.headers_env` through the API: the names are the task's, the values never are."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import cron_task
from tests.fixtures.target import RecordingTarget

Client = AsyncTestClient[Any]


async def test_a_task_keeps_and_shows_the_variable_names_only(
    client: Client, recording_target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPORTS_API_KEY", "v4lue-kept-in-the-environment")
    body = cron_task(recording_target.url())
    body["target"]["headers_env"] = {"X-Api-Key": "REPORTS_API_KEY"}

    created = await client.post("/tasks", json=body)
    dry_run = await client.post("/tasks/nightly-report/dry-run")

    assert created.status_code == 201, created.text
    assert created.json()["target"]["headers_env"] == {"X-Api-Key": "REPORTS_API_KEY"}
    assert dry_run.json()["headers"]["X-Api-Key"] == "***"
    for answer in (created, dry_run, await client.get("/tasks")):
        assert "v4lue-kept-in-the-environment" not in answer.text


async def test_a_merge_patch_removes_one_header(
    client: Client, recording_target: RecordingTarget
) -> None:
    body = cron_task(recording_target.url())
    body["target"]["headers_env"] = {"X-Api-Key": "KEY", "X-Tenant": "TENANT"}
    await client.post("/tasks", json=body)

    patched = await client.patch(
        "/tasks/nightly-report",
        json={"target": {"headers_env": {"X-Tenant": None}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )

    assert patched.json()["target"]["headers_env"] == {"X-Api-Key": "KEY"}


@pytest.mark.parametrize(
    ("target", "field", "words"),
    [
        ({"headers_env": {"X-Api-Key": "1-not-a-variable"}}, "target.headers_env.X-Api-Key", ""),
        ({"headers_env": {"Bad Header": "KEY"}}, "target.headers_env", "valid header name"),
        ({"headers_env": {"Idempotency-Key": "KEY"}}, "target.headers_env", "set by the"),
        ({"headers_env": {"webhook-signature": "KEY"}}, "target.headers_env", "set by the"),
        (
            {"headers": {"X-Api-Key": "plain"}, "headers_env": {"x-api-key": "KEY"}},
            "target.headers_env",
            "also in headers",
        ),
        (
            {"auth": {"type": "bearer", "token_env": "T"}, "headers_env": {"Authorization": "K"}},
            "target.headers_env",
            "set by auth",
        ),
        ({"headers_env": ["X-Api-Key"]}, "target.headers_env", ""),
    ],
)
async def test_a_bad_entry_is_refused_naming_the_field(
    client: Client,
    recording_target: RecordingTarget,
    target: dict[str, Any],
    field: str,
    words: str,
) -> None:
    body = cron_task(recording_target.url())
    body["target"].update(target)

    await assert_refused(client, body, field, words)


@pytest.mark.parametrize(
    ("where", "field", "words"),
    [
        (
            {"target": {"headers_env": {"X-A": "SCHEDULER_API_TOKENS"}}},
            "target.headers_env.X-A",
            "the scheduler's own settings",
        ),
        (
            {"target": {"headers_env": {"X-A": "scheduler_database_url"}}},
            "target.headers_env.X-A",
            "the scheduler's own settings",
        ),
        (
            {"target": {"auth": {"type": "bearer", "token_env": "SCHEDULER_SIGNING_SECRET"}}},
            "target.auth.token_env",
            "the scheduler's own settings",
        ),
        (
            {"target": {"auth": {"type": "basic", "username": "u", "password_env": "PGPASSWORD"}}},
            "target.auth.password_env",
            "PostgreSQL's client variables",
        ),
        (
            {"notify": {"url": "http://127.0.0.1:9/e", "headers_env": {"X-A": "PGSERVICE"}}},
            "notify.headers_env.X-A",
            "PostgreSQL's client variables",
        ),
    ],
)
async def test_a_variable_of_the_schedulers_own_is_refused(
    client: Client,
    recording_target: RecordingTarget,
    where: dict[str, Any],
    field: str,
    words: str,
) -> None:
    # A task names a variable to send its value to a target: these hold the API tokens,
    # the signing secret and the database's credentials.
    body = cron_task(recording_target.url())
    body["target"].update(where.get("target", {}))
    body.update({k: v for k, v in where.items() if k != "target"})

    await assert_refused(client, body, field, words)


async def assert_refused(client: Client, body: dict[str, Any], field: str, words: str) -> None:
    """The create is a 422 naming `field` alone, with `words` in its message, and
    nothing is written."""
    response = await client.post("/tasks", json=body)

    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert [error["field"] for error in errors] == [field]
    assert words in errors[0]["message"]
    assert (await client.get("/tasks")).json()["items"] == []
