"""The console's explain page (docs/api.md, "Console"): what became of a task's
occurrence at or before a time, in the words `GET /tasks/{id}/explain` answers with,
the time read in the task's zone unless UTC is chosen."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from tests.console.conftest import log_in as browser_log_in
from tests.console.test_console_browser import create as create_live
from tests.console.test_console_browser import expect
from tests.console.test_console_pages import READER, Client, create, log_in
from tests.console.test_console_pages import guarded as guarded  # fixture
from tests.console.test_console_pages import open_console as open_console  # fixture
from tests.entrypoints.helpers import cron_task
from tests.fixtures.target import RecordingTarget
from tests.fixtures.waiting import eventually, wait_for

NEW_YORK_DAILY = {"kind": "cron", "expression": "30 2 * * *", "timezone": "America/New_York"}


def daily_task() -> dict[str, Any]:
    return cron_task("http://127.0.0.1:9/", name="daily", trigger=NEW_YORK_DAILY)


def _verdict(page: str) -> tuple[str, str]:
    """The verdict and the sentence the explain page shows."""
    verdict = re.search(r'Verdict: <span class="verdict verdict-[a-z_]+">([^<]*)</span>', page)
    detail = re.search(r'<p class="detail" role="status">([^<]*)</p>', page)
    assert verdict and detail, "the page shows no verdict"
    return verdict.group(1), detail.group(1).replace("&#39;", "'")


def _asked(page: str) -> str:
    """The instant the page read the form's time as (its <time datetime>)."""
    found = re.search(r'<dt>Asked about</dt><dd><time datetime="([^"]+)"', page)
    assert found, "the page does not say what time it read"
    return found.group(1)


async def test_the_task_page_asks_what_became_of_an_occurrence(open_console: Client) -> None:
    await create(open_console, daily_task())

    page = (await open_console.get("/ui/tasks/daily")).text

    form = re.search(r'<form method="get" action="/ui/tasks/daily/explain".*?</form>', page, re.S)
    assert form, "the task page has no explain form"
    assert 'name="at" type="datetime-local"' in form.group(0)
    assert '<option value="task" selected>America/New_York</option>' in form.group(0)
    assert '<option value="utc">UTC</option>' in form.group(0)


async def test_a_wall_time_is_read_in_the_task_zone_unless_utc_is_chosen(
    open_console: Client,
) -> None:
    await create(open_console, daily_task())
    # 01:30 came twice in New York on 2026-11-01: the first, still on EDT (UTC-4).
    in_zone = await open_console.get("/ui/tasks/daily/explain?at=2026-11-01T01:30")
    in_utc = await open_console.get("/ui/tasks/daily/explain?at=2026-11-01T01:30&zone=utc")

    assert in_zone.status_code == in_utc.status_code == 200
    assert _asked(in_zone.text) == "2026-11-01T05:30:00+00:00"
    assert _asked(in_utc.text) == "2026-11-01T01:30:00+00:00"
    for page, instant in ((in_zone, "2026-11-01T05:30:00Z"), (in_utc, "2026-11-01T01:30:00Z")):
        api = (await open_console.get("/tasks/daily/explain", params={"at": instant})).json()
        assert _verdict(page.text) == (api["verdict"].replace("_", " "), api["detail"])


async def test_a_time_with_an_offset_is_shown_as_the_wall_time_it_names(
    open_console: Client,
) -> None:
    # A date-time input cannot hold an offset: it shows the instant in UTC, with UTC
    # chosen, so that asking again asks about the same instant (06:30Z is New York's
    # second 01:30 that day: the wall time alone would read as the first).
    await create(open_console, daily_task())

    page = await open_console.get("/ui/tasks/daily/explain?at=2026-11-01T01:30:00-05:00")

    assert _asked(page.text) == "2026-11-01T06:30:00+00:00"
    assert 'name="at" type="datetime-local" step="1" value="2026-11-01T06:30:00"' in page.text
    assert '<option value="utc" selected>UTC</option>' in page.text


async def test_a_paused_task_says_it_was_paused_and_no_run_stood_for_it(
    open_console: Client,
) -> None:
    every_second = {"kind": "cron", "expression": "* * * * * *", "timezone": "UTC"}
    body = cron_task("http://127.0.0.1:9/", name="busy", trigger=every_second)
    await create(open_console, body)
    assert (await open_console.post("/tasks/busy/pause")).status_code == 200

    async def paused_page() -> str | None:
        page = (await open_console.get("/ui/tasks/busy/explain")).text  # empty: up to now
        return page if "was paused from" in page else None

    page = await eventually(paused_page, "an occurrence after the pause")

    verdict, detail = _verdict(page)
    assert verdict == "not scheduled"
    assert detail.startswith("not scheduled: the task was paused from ")
    assert "No run stood for it." in page


async def test_a_bad_time_comes_back_naming_the_field_with_what_was_typed(
    open_console: Client,
) -> None:
    await create(open_console, daily_task())

    answer = await open_console.get("/ui/tasks/daily/explain?at=yesterday&zone=utc")

    assert answer.status_code == 422
    assert 'value="yesterday" aria-invalid="true" aria-describedby="e-at-error"' in answer.text
    error = re.search(r'<p class="field-error" id="e-at-error">([^<]*)</p>', answer.text)
    assert error and "(got &#39;yesterday&#39;)" in error.group(1)
    assert "Verdict" not in answer.text
    assert '<option value="utc" selected>UTC</option>' in answer.text  # the choice is kept
    # 9999-12-31 23:59:59 in a zone behind UTC is in the year 10000 there.
    west = {"kind": "cron", "expression": "0 0 * * *", "timezone": "Etc/GMT+12"}
    await create(open_console, cron_task("http://127.0.0.1:9/", name="west", trigger=west))
    too_late = await open_console.get("/ui/tasks/west/explain?at=9999-12-31T23:59:59")
    assert too_late.status_code == 422 and "must be an instant from 1970 to 8999" in too_late.text
    too_long = await open_console.get("/ui/tasks/daily/explain?at=" + "2" * 150)
    assert too_long.status_code == 422 and 'id="e-at-error">is longer than 100' in too_long.text
    bad_zone = await open_console.get("/ui/tasks/daily/explain?zone=mars")
    assert bad_zone.status_code == 422 and "must be task or utc" in bad_zone.text
    # Both named at once: a bad zone hid the bad time (a console audit).
    both = await open_console.get("/ui/tasks/daily/explain?at=garbage&zone=mars")
    assert both.status_code == 422 and 'id="e-zone-error">must be task or utc' in both.text
    assert 'id="e-at-error">' in both.text and "(got &#39;garbage&#39;)" in both.text


async def test_a_read_only_token_may_ask(guarded: Client) -> None:
    await create(guarded, daily_task())
    await log_in(guarded, READER)

    answer = await guarded.get("/ui/tasks/daily/explain?at=2026-11-01T01:30")

    assert answer.status_code == 200
    assert _verdict(answer.text)[0] == "not scheduled"  # the task did not exist then


async def test_an_unknown_task_is_a_404_page_naming_it(open_console: Client) -> None:
    answer = await open_console.get("/ui/tasks/nosuch/explain")
    # The use case's words, not routing's bare "Not Found": the page asked the store.
    assert answer.status_code == 404 and "no task with id or name &#39;nosuch&#39;" in answer.text


# -- in a real browser, against `serve` on PostgreSQL ---------------------------------------


@pytest.mark.postgres
@pytest.mark.slow
def test_an_occurrence_that_ran_is_explained_with_a_link_to_its_run(
    new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    berlin = {"kind": "cron", "expression": "* * * * * *", "timezone": "Europe/Berlin"}
    task = create_live(api, target, trigger=berlin)
    path = f"/{task['name']}"
    first = wait_for(lambda: target.received(path), what="a scheduled call")[0]
    assert api.post(f"/tasks/{task['id']}/pause").status_code == 200
    # The key names the occurrence: <task id>:<Unix seconds of its fire time>.
    key = first.header("Idempotency-Key")
    assert key is not None, "a scheduled call carries an Idempotency-Key"
    fired = datetime.fromtimestamp(int(key.split(":")[1]), UTC)
    wall = fired.astimezone(ZoneInfo("Europe/Berlin"))
    at = {"task": task["id"], "since": fired.isoformat(), "until": fired.isoformat()}

    def written() -> bool:  # the call was received before its outcome is written
        runs = api.get("/runs", params=at).json()["items"]
        return bool(runs) and runs[0]["status"] == "succeeded"

    wait_for(written, what="the first call's run to be written as succeeded")
    page = new_page()
    browser_log_in(page)
    page.goto(f"/ui/tasks/{task['name']}")

    page.get_by_label("What became of the occurrence at or before").fill(
        wall.strftime("%Y-%m-%dT%H:%M:%S")
    )
    page.get_by_role("button", name="Explain").click()

    page.wait_for_url(f"**/ui/tasks/{task['name']}/explain?*")
    expect()(page.get_by_role("heading", name="Verdict: ran")).to_be_visible()
    expect()(page.get_by_role("status")).to_contain_text("ran")
    row = page.locator("table.runs tbody tr")
    expect()(row).to_have_count(1)
    expect()(row).to_contain_text("succeeded")
    row.get_by_role("link").click()
    page.wait_for_url("**/ui/runs/*")
    expect()(page.locator("main")).to_contain_text(fired.strftime("%Y-%m-%d %H:%M:%S UTC"))


@pytest.mark.postgres
@pytest.mark.slow
def test_the_explain_page_fits_a_phone(
    new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    task = create_live(api, target)
    page = new_page(width=360)
    browser_log_in(page)
    asked = (datetime.now(UTC) - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%S")
    page.goto(f"/ui/tasks/{task['name']}/explain?at={asked}&zone=utc")
    expect()(page.get_by_role("heading", name=re.compile("^Verdict"))).to_be_visible()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 360, f"the page is {width} px wide at 360"
