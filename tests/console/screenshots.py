"""Make the console's screenshots in docs/images/ (for the README):

    python -m tests.console.screenshots

A real `serve` (in-memory store) with a few tasks and runs against a recording target,
photographed by the same headless Chromium the browser tests use.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

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


def explain_failed_call(api: httpx.Client, target: RecordingTarget) -> str:
    """A task whose target answered 503 at its first fire time (then paused): the path
    of the explain page of that occurrence, asked in the task's zone."""
    target.respond("/partner", Response(503, b"partner down for maintenance"))
    zone = "Europe/Paris"
    answer = api.post(
        "/tasks",
        json={
            "name": "partner-sync",
            "trigger": {"kind": "cron", "expression": "* * * * * *", "timezone": zone},
            "target": {"url": target.url("/partner"), "method": "POST"},
        },
    )
    answer.raise_for_status()
    for _ in range(100):
        if target.received("/partner"):
            break
        time.sleep(0.1)
    time.sleep(1.5)  # the pause, a version of its own, a second or more after that call
    api.post("/tasks/partner-sync/pause").raise_for_status()
    time.sleep(1.0)  # its outcome recorded
    key = target.received("/partner")[0].header("Idempotency-Key") or ""
    fired = datetime.fromtimestamp(int(key.split(":")[1]), UTC).astimezone(ZoneInfo(zone))
    return f"/ui/tasks/partner-sync/explain?at={fired:%Y-%m-%dT%H:%M:%S}"


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
                page.goto(explain_failed_call(api, target))
                page.screenshot(path=str(IMAGES / "console-explain.png"))
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
