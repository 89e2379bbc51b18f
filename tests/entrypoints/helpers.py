"""Helpers of the entrypoint tests: settings that ignore the environment, a bounded wait,
request bodies."""

from __future__ import annotations

from typing import Any, TypeVar

from entrypoints.settings import Settings

T = TypeVar("T")


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
