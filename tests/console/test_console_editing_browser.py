"""The console's task editor in a real browser, against `serve` on PostgreSQL: a task
made, edited and deleted as a person would, and the editor on a phone's width. The
editor's rules over HTTP are tests/console/test_console_editing.py."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from tests.console.conftest import log_in as browser_log_in
from tests.console.test_console_browser import create as create_live
from tests.console.test_console_browser import expect
from tests.console.test_console_editing import DAILY
from tests.fixtures.target import RecordingTarget


@pytest.mark.postgres
@pytest.mark.slow
def test_a_task_is_made_edited_and_deleted_from_the_console(
    new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    name = f"edited-{uuid.uuid4().hex[:8]}"
    page = new_page()
    browser_log_in(page)
    page.get_by_role("link", name="New task").click()
    body = {"name": name, "trigger": DAILY, "target": {"url": target.url(f"/{name}")}}
    page.get_by_label("Definition (JSON)").fill(json.dumps(body, indent=2))
    page.get_by_role("button", name="Create").click()

    page.wait_for_url(f"**/ui/tasks/{name}?done=created")
    expect()(page.get_by_role("status")).to_contain_text("Created")
    expect()(page.locator("dl.facts")).to_contain_text("at 02:30 every day, New York time")

    page.get_by_role("link", name="Edit").click()
    text = page.get_by_label("Definition (JSON)").input_value()
    page.get_by_label("Definition (JSON)").fill(text.replace("30 2 * * *", "0 7 * * 1-5"))
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(f"**/ui/tasks/{name}?done=saved")
    expect()(page.locator("dl.facts")).to_contain_text(
        "at 07:00 on Monday to Friday, New York time"
    )
    assert api.get(f"/tasks/{name}").json()["trigger"]["expression"] == "0 7 * * 1-5"

    page.get_by_role("link", name="Delete").click()
    page.get_by_role("button", name=f"Delete {name}").click()
    page.wait_for_url(f"**/ui/?deleted={name}")
    expect()(page.get_by_role("status")).to_contain_text("Deleted")
    assert api.get(f"/tasks/{name}").status_code == 404


@pytest.mark.postgres
@pytest.mark.slow
def test_the_editor_fits_a_phone(new_page: Any, api: httpx.Client, target: RecordingTarget) -> None:
    task = create_live(api, target)
    page = new_page(width=360)
    browser_log_in(page)
    page.goto(f"/ui/tasks/{task['name']}/edit")
    expect()(page.get_by_label("Definition (JSON)")).to_be_visible()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 360, f"the page is {width} px wide at 360"


@pytest.mark.postgres
@pytest.mark.slow
def test_a_dry_run_comes_back_with_back_and_forward(
    new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    """The dry run writes nothing, so it is a page of its own: going back to the task and
    forward again shows it, where a posted form made the browser ask to post it again
    (an audit met "Confirm Form Resubmission")."""
    task = create_live(api, target)
    page = new_page()
    browser_log_in(page)
    page.goto(f"/ui/tasks/{task['name']}")
    page.get_by_role("link", name="Dry run").click()
    page.wait_for_url(f"**/ui/tasks/{task['name']}/dry-run")
    expect()(page.get_by_role("heading", name="Dry run")).to_be_visible()

    page.go_back()
    expect()(page.locator("h1")).to_have_text(task["name"])
    page.go_forward()
    expect()(page.get_by_role("heading", name="Dry run")).to_be_visible()
    page.reload()
    expect()(page.get_by_role("heading", name="Dry run")).to_be_visible()
    assert target.requests == []  # nothing was called
