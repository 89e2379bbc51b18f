"""Fixtures of the browser tests: one `serve` on PostgreSQL per module, one browser,
a fresh page per test that leaves a screenshot when the test fails."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from tests.console.browser import SCREENSHOTS, launch, missing
from tests.entrypoints.live import LiveServer
from tests.fixtures.target import RecordingTarget

ADMIN, VIEWER = "console-admin-token", "console-viewer-token"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    item.stash.setdefault(_FAILED, False)
    if report.failed:
        item.stash[_FAILED] = True
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture(scope="module")
def target() -> Iterator[RecordingTarget]:
    recording = RecordingTarget()
    recording.start()
    try:
        yield recording
    finally:
        recording.stop()


@pytest.fixture(scope="module")
def console_server(database_url: str) -> Iterator[LiveServer]:
    schema = f"console_{uuid.uuid4().hex[:10]}"
    environ = {
        "SCHEDULER_DATABASE_URL": database_url,
        "SCHEDULER_SCHEMA": schema,
        "SCHEDULER_API_TOKENS": f"{ADMIN},{VIEWER}:read",
        "SCHEDULER_MAX_POLL_INTERVAL": "60",
    }
    try:
        with LiveServer(environ) as live:
            yield live
    finally:
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(scope="module")
def api(console_server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=console_server.url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10
    ) as client:
        yield client


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("Playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def new_page(
    browser: Any, console_server: LiveServer, request: pytest.FixtureRequest
) -> Iterator[Any]:
    """Make pages (`new_page(width=360)`); each failing test saves their screenshots."""
    contexts: list[Any] = []

    def make(width: int = 1280, height: int = 800) -> Any:
        context = browser.new_context(
            base_url=console_server.url, viewport={"width": width, "height": height}
        )
        context.set_default_timeout(15_000)
        contexts.append(context)
        return context.new_page()

    yield make
    failed = request.node.stash.get(_FAILED, False)
    for index, context in enumerate(contexts):
        if failed:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            for number, page in enumerate(context.pages):
                path = SCREENSHOTS / f"{request.node.name}-{index}-{number}.png"
                page.screenshot(path=str(path), full_page=True)
                print(f"screenshot of the failing page: {path}")
        context.close()


def log_in(page: Any, token: str = ADMIN) -> None:
    page.goto("/ui/")
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/ui/")
