"""What the system tests share: waiting on real servers, creating tasks through them."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx


def wait_for(condition: Callable[[], bool], within: float, what: str) -> None:
    """Poll `condition` every 0.2 s (the servers work in their own processes); fail the
    test, saying what it waited for, after `within` seconds."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within} s waiting for {what}")
        time.sleep(0.2)


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
