"""What the system tests share: creating tasks through a real server (they wait with
tests/fixtures/waiting.py `wait_for`)."""

from __future__ import annotations

import httpx


def create(api: str, name: str, url: str, *, every: int = 1, timeout: float = 5) -> None:
    """An interval task calling `url` every `every` seconds, created through `api`."""
    response = httpx.post(
        f"{api}/tasks",
        json={
            "name": name,
            "trigger": {"kind": "interval", "every": every},
            "target": {"url": url, "timeout_seconds": timeout},
            "misfire_grace_seconds": 30,
        },
        timeout=10,
    )
    assert response.status_code == 201, response.text
