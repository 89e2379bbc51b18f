"""Make the console's screenshots in docs/images/ (for the README):

    python -m tests.console.screenshots

A real `serve` (in-memory store) with a few tasks and runs against a recording target,
photographed by the same headless Chromium the browser tests use.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

from tests.console.browser import launch
from tests.entrypoints.live import LiveServer
from tests.fixtures.target import RecordingTarget, Response

IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
TOKEN = "screenshot-token"


def populate(api: httpx.Client, target: RecordingTarget) -> dict[str, str]:
    target.respond("/report", Response(200, b'{"rows": 1204}'))
    target.respond(
        "/inventory", *[Response(200, b"synced")] * 4, Response(502, b"<html>Bad gateway</html>")
    )
    tasks = [
        (
            "nightly-report",
            {"kind": "cron", "expression": "30 2 * * *", "timezone": "America/New_York"},
            "/report",
            ["reports"],
        ),
        ("sync-inventory", {"kind": "interval", "every": 900}, "/inventory", ["shop"]),
        (
            "weekday-digest",
            {"kind": "cron", "expression": "0 9 * * 1-5", "timezone": "Europe/London"},
            "/report",
            ["mail"],
        ),
        (
            "monthly-invoices",
            {"kind": "calendar", "months": 1, "hour": 6, "timezone": "Europe/Berlin"},
            "/report",
            ["billing"],
        ),
    ]
    ids = {}
    for name, trigger, path, tags in tasks:
        answer = api.post(
            "/tasks",
            json={
                "name": name,
                "trigger": trigger,
                "tags": tags,
                "description": f"Calls {path} on schedule.",
                "target": {"url": target.url(path), "method": "POST"},
            },
        )
        answer.raise_for_status()
        ids[name] = answer.json()["id"]
    api.post(f"/tasks/{ids['weekday-digest']}/pause").raise_for_status()
    last = ""
    for name, count in (("nightly-report", 6), ("sync-inventory", 5), ("weekday-digest", 2)):
        for _ in range(count):
            last = api.post(f"/tasks/{ids[name]}/runs").json()["id"]
            time.sleep(0.15)
    time.sleep(1.0)
    return {"run": last}


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    target = RecordingTarget()
    target.start()
    try:
        with (
            LiveServer({"SCHEDULER_API_TOKENS": TOKEN, "SCHEDULER_LOG_LEVEL": "WARNING"}) as live,
            httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {TOKEN}"}) as api,
        ):
            found = populate(api, target)
            with sync_playwright() as playwright:
                browser = launch(playwright)
                page = browser.new_page(base_url=live.url, viewport={"width": 1100, "height": 560})
                page.goto("/ui/login")
                page.get_by_label("API token").fill(TOKEN)
                page.get_by_role("button", name="Log in").click()
                page.wait_for_url("**/ui/")
                page.screenshot(path=str(IMAGES / "console-tasks.png"))
                page.goto("/ui/tasks/nightly-report")
                page.screenshot(path=str(IMAGES / "console-task.png"), full_page=False)
                page.set_viewport_size({"width": 360, "height": 740})
                page.goto(f"/ui/runs/{found['run']}")
                page.screenshot(path=str(IMAGES / "console-run-360px.png"))
                browser.close()
    finally:
        target.stop()
    for image in sorted(IMAGES.glob("console-*.png")):
        print(image.relative_to(IMAGES.parents[1]), image.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
