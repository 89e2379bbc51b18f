"""A task stored before literal credential headers were refused: its `Authorization` is
still sent, never answered, and the task must drop it before any other change."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from litestar.testing import AsyncTestClient
from psycopg import sql

from entrypoints.container import build_container
from entrypoints.http.app import create_app
from tests.entrypoints.helpers import cron_task, fields_of, make_settings

pytestmark = pytest.mark.postgres

Client = AsyncTestClient[Any]
SECRET = "Bearer s3cret-from-before"


@pytest.fixture
async def api(database_url: str, postgres_schema: str) -> AsyncIterator[Client]:
    settings = make_settings(
        target_allow="127.0.0.1", database_url=database_url, db_schema=postgres_schema
    )
    async with AsyncTestClient(app=create_app(build_container(settings))) as client:
        yield client


async def stored_with_authorization(api: Client, database_url: str, schema: str) -> str:
    """A task whose row and history hold a literal Authorization, as rows written before
    the rule do: made with another header, then renamed in the database."""
    body = cron_task("http://127.0.0.1:9/")
    body["target"]["headers"] = {"X-Legacy": SECRET, "X-Tenant": "acme"}
    created = await api.post("/tasks", json=body)
    assert created.status_code == 201, created.text
    renamed = sql.SQL("UPDATE {}.{} SET {} = replace({}::text, 'X-Legacy', 'Authorization')::jsonb")
    with psycopg.connect(database_url, autocommit=True) as conn:
        for table, column in (("tasks", "target"), ("task_history", "changes")):
            conn.execute(renamed.format(*map(sql.Identifier, (schema, table, column, column))))
    task_id: str = created.json()["id"]
    return task_id


async def test_its_credential_is_answered_as_stars_everywhere(
    api: Client, database_url: str, postgres_schema: str
) -> None:
    task_id = await stored_with_authorization(api, database_url, postgres_schema)

    one = await api.get(f"/tasks/{task_id}")
    listed = await api.get("/tasks")
    history = await api.get(f"/tasks/{task_id}/history")
    dry_run = await api.post(f"/tasks/{task_id}/dry-run")
    page = await api.get("/ui/tasks/nightly-report")

    assert one.json()["target"]["headers"] == {"Authorization": "***", "X-Tenant": "acme"}
    assert listed.json()["items"][0]["target"]["headers"]["Authorization"] == "***"
    first = history.json()["items"][-1]["changes"]["target"]
    assert first[1]["headers"] == {"Authorization": "***", "X-Tenant": "acme"}
    assert dry_run.json()["headers"]["Authorization"] == "***"
    assert page.status_code == 200
    for answer in (one, listed, history, dry_run, page):
        assert "s3cret-from-before" not in answer.text


async def test_it_changes_only_once_the_credential_moves_out(
    api: Client, database_url: str, postgres_schema: str
) -> None:
    task_id = await stored_with_authorization(api, database_url, postgres_schema)

    refused = await api.patch(f"/tasks/{task_id}", json={"description": "nightly"})
    unchanged = await api.get(f"/tasks/{task_id}")
    moved = await api.patch(
        f"/tasks/{task_id}",
        json={
            "description": "nightly",
            "target": {
                "headers": {"Authorization": None},
                "headers_env": {"Authorization": "REPORTS_AUTHORIZATION"},
            },
        },
    )

    assert fields_of(refused) == ["target.headers"]
    assert "headers_env" in refused.json()["errors"][0]["message"]
    assert "s3cret-from-before" not in refused.text
    assert unchanged.json()["version"] == 1
    assert moved.status_code == 200, moved.text
    assert moved.json()["target"]["headers"] == {"X-Tenant": "acme"}
    assert moved.json()["target"]["headers_env"] == {"Authorization": "REPORTS_AUTHORIZATION"}
    assert moved.json()["version"] == 2


async def test_an_apply_that_moves_it_out_shows_its_old_value_as_stars(
    api: Client, database_url: str, postgres_schema: str
) -> None:
    # An apply answers each updated task's changes, old and new: the old headers held
    # the credential.
    task_id = await stored_with_authorization(api, database_url, postgres_schema)
    stored = (await api.get(f"/tasks/{task_id}")).json()
    spec = {key: stored[key] for key in ("name", "trigger", "target")}
    spec["target"] = {**spec["target"], "headers": {"X-Tenant": "acme"}}
    spec["target"]["headers_env"] = {"Authorization": "REPORTS_AUTHORIZATION"}

    for dry_run in (True, False):
        applied = await api.post("/tasks/apply", json={"tasks": [spec], "dry_run": dry_run})

        assert applied.status_code == 200, applied.text
        old, new = applied.json()["changes"]["nightly-report"]["target"]
        assert old["headers"] == {"Authorization": "***", "X-Tenant": "acme"}
        assert new["headers_env"] == {"Authorization": "REPORTS_AUTHORIZATION"}
        assert "s3cret-from-before" not in applied.text
