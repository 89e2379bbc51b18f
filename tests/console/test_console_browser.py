"""The console in a real browser, against a real `serve` on PostgreSQL calling a real
recording target: what an operator sees and does."""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from tests.console.conftest import ADMIN, VIEWER, log_in
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def expect() -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect


def create(api: httpx.Client, target: RecordingTarget, **fields: Any) -> dict[str, Any]:
    name = fields.pop("name", f"task-{uuid.uuid4().hex[:8]}")
    body = {
        "name": name,
        "trigger": {"kind": "cron", "expression": "30 2 * * *", "timezone": "America/New_York"},
        "target": {"url": target.url(f"/{name}"), "method": "POST"},
        **fields,
    }
    response = api.post("/tasks", json=body)
    assert response.status_code == 201, response.text
    task: dict[str, Any] = response.json()
    return task


def utc_words(instant: str) -> str:
    """'2026-12-02T07:30:00Z' as the console writes it: '2026-12-02 07:30:00 UTC'."""
    return instant.replace("T", " ").replace("Z", " UTC")


def test_a_task_made_through_the_api_is_listed_with_its_trigger_and_next_run(
    new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    task = create(api, target)
    page = new_page()
    log_in(page)
    row = page.get_by_role("row").filter(has_text=task["name"])
    expect()(row).to_contain_text("at 02:30 every day, New York time")
    expect()(row).to_contain_text("enabled")
    expect()(row).to_contain_text(utc_words(task["next_run_at"]))
    # In New York's time too: 02:30, or 03:30 on the night that 02:30 does not exist.
    local = datetime.fromisoformat(task["next_run_at"]).astimezone(ZoneInfo("America/New_York"))
    expect()(row).to_contain_text(local.strftime("%H:%M:%S %Z"))


def test_the_pause_button_pauses_the_task_and_the_api_agrees(
    new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    task = create(api, target)
    page = new_page()
    log_in(page)
    page.goto(f"/ui/tasks/{task['name']}")
    page.get_by_role("button", name="Pause").click()
    expect()(page.get_by_role("status")).to_contain_text("Paused")
    expect()(page.locator(".facts")).to_contain_text("paused")
    assert api.get(f"/tasks/{task['id']}").json()["enabled"] is False
    page.get_by_role("button", name="Resume").click()
    expect()(page.locator(".facts")).to_contain_text("enabled")
    assert api.get(f"/tasks/{task['id']}").json()["enabled"] is True


def test_run_now_shows_the_run_with_its_http_status(
    new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    task = create(api, target)
    target.respond(f"/{task['name']}", Response(201, b"created", delay=2.0))
    page = new_page()
    log_in(page)
    page.goto(f"/ui/tasks/{task['name']}")
    page.get_by_role("button", name="Run now").click()
    page.wait_for_url("**/ui/runs/*")
    expect()(page.locator("h1")).to_contain_text("running")
    expect()(page.locator(".facts")).to_contain_text("counted when the run ends")
    # A running run's page refreshes itself (console.js) until the run is over: its
    # facts, and its heading and title with them.
    facts = page.locator(".facts")
    expect()(facts).to_contain_text("succeeded", timeout=20_000)
    expect()(facts).to_contain_text("201")
    expect()(page.locator("h1")).to_contain_text("succeeded")
    expect()(page).to_have_title(re.compile("^Run succeeded"))
    expect()(page.locator(".excerpt")).to_have_text("created")
    assert len(target.received(f"/{task['name']}")) == 1
    # The task page lists it; opening it from there shows the same run.
    page.goto(f"/ui/tasks/{task['name']}")
    runs = page.locator("table.runs")
    expect()(runs).to_contain_text("succeeded")
    expect()(runs).to_contain_text("manual")
    runs.get_by_role("link").first.click()
    expect()(page.locator(".facts")).to_contain_text("201")


def test_a_failing_targets_error_is_shown(
    new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    task = create(api, target)
    target.respond(f"/{task['name']}", Response(503, b"down for maintenance"))
    run = api.post(f"/tasks/{task['id']}/runs").json()
    page = new_page()
    log_in(page)
    page.goto(f"/ui/runs/{run['id']}")
    expect()(page.locator(".facts")).to_contain_text("failed", timeout=20_000)
    expect()(page.locator(".facts")).to_contain_text("503")
    expect()(page.locator("pre.error-text")).to_contain_text("503")
    expect()(page.locator(".excerpt")).to_have_text("down for maintenance")
    page.goto("/ui/")
    row = page.get_by_role("row").filter(has_text=task["name"])
    expect()(row).to_contain_text("failed")
    expect()(row.get_by_role("img")).to_have_attribute("aria-label", re.compile("1 failed"))
    page.goto(f"/ui/runs?status=failed&task={task['name']}")
    listed = page.locator("table.runs")
    expect()(listed).to_contain_text(task["name"])
    expect()(listed).to_contain_text("503")


def test_a_read_only_token_sees_no_buttons_and_cannot_post(
    new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    task = create(api, target)
    page = new_page()
    log_in(page, VIEWER)
    page.goto(f"/ui/tasks/{task['name']}")
    expect()(page.locator("h1")).to_have_text(task["name"])
    for name in ("Run now", "Pause", "Resume"):
        expect()(page.get_by_role("button", name=name)).to_have_count(0)
    expect()(page.get_by_role("link", name="Dry run")).to_have_count(1)
    csrf = page.locator("input[name=csrf_token]").first.get_attribute("value")
    answer = page.request.post(
        f"/ui/tasks/{task['name']}/pause", form={"csrf_token": csrf}, max_redirects=0
    )
    assert answer.status == 403
    assert api.get(f"/tasks/{task['id']}").json()["enabled"] is True


def test_what_users_and_targets_supply_is_shown_as_text(
    new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    script = "<script>document.title='pwned'</script>"
    task = create(api, target, description=f"nightly {script} job", tags=["x-1"])
    html = b"<h2 id='injected'>hi</h2><img src=x onerror=\"document.title='pwned'\">"
    target.respond(f"/{task['name']}", Response(200, html, {"Content-Type": "text/html"}))
    run = api.post(f"/tasks/{task['id']}/runs").json()
    page = new_page()
    log_in(page)
    page.goto(f"/ui/tasks/{task['name']}")
    expect()(page.locator(".description")).to_have_text(f"nightly {script} job")
    page.goto(f"/ui/runs/{run['id']}")
    expect()(page.locator(".excerpt")).to_have_text(html.decode(), timeout=20_000)
    expect()(page.locator("#injected")).to_have_count(0)
    assert "pwned" not in page.title()


@pytest.mark.parametrize("where", ["tasks", "task", "run", "runs"])
@pytest.mark.parametrize("length", [40, 56])  # kept on one line at 1,280 px, and wrapping
def test_a_360_px_wide_page_does_not_scroll_sideways(
    where: str, length: int, new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    name = f"a-rather-long-task-name-{uuid.uuid4().hex}"[:length]
    task = create(api, target, name=name, tags=["t1"])
    run = api.post(f"/tasks/{task['id']}/runs").json()
    page = new_page(width=360, height=740)
    log_in(page)
    page.goto(
        {
            "tasks": "/ui/",
            "task": f"/ui/tasks/{task['name']}",
            "run": f"/ui/runs/{run['id']}",
            "runs": "/ui/runs",
        }[where]
    )
    widths = page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1], f"the page is {widths[0]} px wide in a {widths[1]} px window"


def test_a_phone_card_labels_every_value_and_shows_no_empty_label(
    new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    task = create(api, target)
    run = api.post(f"/tasks/{task['id']}/runs").json()
    page = new_page(width=360, height=740)
    log_in(page)
    page.goto(f"/ui/runs/{run['id']}")  # once it has ended, succeeded, with no error
    expect()(page.locator("h1 .status")).to_contain_text("succeeded", timeout=20_000)
    page.goto(f"/ui/tasks/{task['name']}")
    # The run's card: its empty Error cell is not shown as a bare "Error:".
    error_cell = page.locator('table.runs td[data-label="Error"]').first
    expect()(error_cell).to_be_hidden()
    # The history's card: the version says what it is, not a bare number.
    version = page.locator('table.history th[data-label="Version"]').first
    label = version.evaluate("e => getComputedStyle(e, '::before').content")
    assert label == '"Version: "', label


def test_the_timeline_keeps_its_day_labels_readable_at_360_px(
    new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    # It scrolls sideways in its own box instead of squeezing its labels to a sliver;
    # the page itself still does not scroll sideways.
    task = create(api, target)
    widths = {}
    for width in (1280, 360):
        page = new_page(width=width, height=740)
        log_in(page)
        page.goto(f"/ui/tasks/{task['name']}")
        label = page.locator(".timeline .day-label").first
        widths[width] = label.evaluate("e => e.getBoundingClientRect().width")
        page_width = page.evaluate(
            "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        )
        assert page_width, f"the page scrolls sideways at {width} px"
    assert widths[360] >= 0.5 * widths[1280], widths


def test_run_now_by_keyboard_alone(
    new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    task = create(api, target)
    page = new_page()
    log_in(page)
    page.goto(f"/ui/tasks/{task['name']}")
    for _ in range(40):
        page.keyboard.press("Tab")
        focused = page.evaluate("() => document.activeElement.textContent.trim()")
        if focused == "Run now":
            break
    else:
        pytest.fail("Tab never reached the Run now button")
    page.keyboard.press("Enter")
    page.wait_for_url("**/ui/runs/*")
    expect()(page.locator("h1")).to_contain_text("Run")


def test_the_task_page_links_the_calendar_it_names_and_its_dates_are_listed(
    new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    name = f"closures-{uuid.uuid4().hex[:8]}"
    made = api.post(
        "/calendars",
        json={"name": name, "description": "Office closed", "dates": ["2030-12-24", "2031-01-02"]},
    )
    assert made.status_code == 201, made.text
    calendar = {"name": name, "policy": "previous_business_day"}
    trigger = {"kind": "cron", "expression": "0 9 * * *", "calendar": calendar}
    task = create(api, target, trigger=trigger)
    page = new_page()
    log_in(page)
    page.goto(f"/ui/tasks/{task['name']}")
    facts = page.locator(".facts")
    policy_words = "a fire time on one of its dates moves to the previous day not in it"
    expect()(facts).to_contain_text(f"{name}: {policy_words}")
    page.get_by_role("link", name=name).click()
    expect()(page.get_by_role("heading", level=1)).to_have_text(name)
    expect()(page.get_by_role("link", name=task["name"])).to_be_visible()
    expect()(page.get_by_text("2030: 1 date")).to_be_visible()
    expect()(page.locator("main")).to_contain_text("2030-12-24")
    page.goto("/ui/calendars")
    row = page.get_by_role("row").filter(has_text=name)
    expect()(row).to_contain_text("Office closed")
    expect()(row).to_contain_text("2 (2030-12-24 to 2031-01-02)")


@pytest.mark.parametrize("where", ["tasks", "task", "runs", "events"])
def test_at_1280_px_no_word_in_a_table_is_broken(
    where: str, new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    long_url = f"/{uuid.uuid4().hex[:6]}/" + "segment-" * 20
    body = {
        "name": f"quarterly-reconciliation-{uuid.uuid4().hex[:6]}",
        "tags": ["reporting", "finance"],
        "trigger": {"kind": "cron", "expression": "*/7 * * * *"},
        "target": {"url": target.url(long_url)},
        "notify": {"url": target.url(long_url + "events"), "events": ["run.failed"]},
    }
    task = api.post("/tasks", json=body).json()
    target.respond(long_url, Response(503, b"unavailable"))
    run = api.post(f"/tasks/{task['id']}/runs").json()
    ended = wait_for(lambda: finished(api, run["id"]), what="the 503 run to end")
    assert ended["status"] == "failed", ended
    page = new_page(width=1280)
    log_in(page)
    paths = {"tasks": "/ui/", "task": f"/ui/tasks/{task['name']}", "runs": "/ui/runs"}
    page.goto((paths | {"events": "/ui/events"})[where])
    # Each word of a cell laid out on one line: one client rect per word. A string
    # longer than 40 characters (a URL) may still be broken to fit its column.
    broken = page.evaluate(
        """() => {
          const broken = [];
          for (const cell of document.querySelectorAll("th, td")) {
            const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
            for (let node; (node = walker.nextNode()); ) {
              for (const match of node.data.matchAll(/\\S+/g)) {
                if (match[0].length > 40) continue;
                const range = document.createRange();
                range.setStart(node, match.index);
                range.setEnd(node, match.index + match[0].length);
                if (range.getClientRects().length > 1) broken.push(match[0]);
              }
            }
          }
          return broken;
        }"""
    )
    assert broken == []


def finished(api: httpx.Client, run_id: str) -> dict[str, Any] | None:
    """The run once it has ended; None while it is queued or running."""
    run: dict[str, Any] = api.get(f"/runs/{run_id}").json()
    return run if run["status"] not in ("running", "queued") else None


def test_a_refresh_that_fails_says_so(new_page: Any) -> None:
    page = new_page()
    log_in(page)
    page.goto("/ui/runs")
    notice = page.get_by_role("status")
    expect()(notice).to_be_hidden()
    # The server stops answering: the next refresh says the page is stale, and since when.
    page.route(lambda url: url.endswith("/ui/runs"), lambda route: route.abort())
    expect()(notice).to_contain_text(
        re.compile(r"Could not refresh: the server did not answer — .* from \d\d:\d\d:\d\d UTC"),
        timeout=15_000,
    )
    # It answers again, but the session is gone: the notice links the login page.
    page.unroute_all()
    page.context.clear_cookies()
    expect()(notice).to_contain_text("Your session has ended", timeout=15_000)
    again = notice.get_by_role("link", name="Log in again")
    expect()(again).to_have_attribute("href", "/ui/login?next=%2Fui%2Fruns")
    # Logging in from there comes back to this page.
    again.click()
    page.get_by_label("API token").fill(ADMIN)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/ui/runs")
