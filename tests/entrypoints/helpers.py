"""Helpers of the entrypoint tests: settings that ignore the environment, a bounded wait,
request bodies, and the checks of an RFC 9457 problem answer the error tests share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from litestar.testing import AsyncTestClient

from entrypoints.settings import Settings

T = TypeVar("T")
Client = AsyncTestClient[Any]
PROBLEM_JSON = "application/problem+json"


def make_settings(**overrides: Any) -> Settings:
    """Settings for a test: the memory store, no tokens, unless `overrides` say otherwise
    (the variables of the environment running the tests never leak in)."""
    values: dict[str, Any] = {
        "database_url": None,
        "api_tokens": "",
        "signing_secret": "",
        "events_url": None,
        "allow_anonymous": False,
        "host": "127.0.0.1",
        "port": 0,
        "engine": "native",
        "target_allow": "",
        "target_deny": "",
        "max_poll_interval": 5.0,
        "replica": "test:1",
    }
    values.update(overrides)
    return Settings(**values)


def cron_task(target_url: str, name: str = "nightly-report", **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "trigger": {"kind": "cron", "expression": "30 2 * * *", "timezone": "America/New_York"},
        "target": {"url": target_url},
        **fields,
    }


def fields_of(response: Any) -> list[str]:
    """The fields a 422 problem document names."""
    assert response.status_code == 422, response.text
    return [error["field"] for error in response.json()["errors"]]


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


def recent_days(first: int = 3, last: int = 2) -> tuple[datetime, datetime]:
    """Midnight UTC `first` days ago and `last` days ago: a backfill's range in the past
    but within the run retention (30 days), which a fixed date would leave one day."""
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return today - timedelta(days=first), today - timedelta(days=last)
