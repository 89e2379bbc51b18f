"""The console's backfill form (docs/api.md, "Console"): the same use case as `POST
/tasks/{id}/backfill`. A dry run lists the occurrences and runs nothing; a backfill
leads to its runs on the runs page, each called with its occurrence's Idempotency-Key."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.console.conftest import log_in
from tests.console.test_console_browser import create, expect
from tests.console.test_console_pages import Client, csrf_of
from tests.console.test_console_pages import open_console as open_console  # fixture
from tests.entrypoints.helpers import cron_task
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually

# Daily at 03:00 UTC: nothing fires while a test runs, and the past holds fire times.
DAILY = {"kind": "cron", "expression": "0 3 * * *", "timezone": "UTC"}


def past_range() -> tuple[datetime, datetime, list[datetime]]:
    """From 03:00 three days ago to a minute ago, and the fire times of DAILY in it."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start = now.replace(hour=3, minute=0) - timedelta(days=3)
    end = now - timedelta(minutes=1)
    fires = [start + timedelta(days=k) for k in range(4) if start + timedelta(days=k) <= end]
    return start, end, fires


def form_time(instant: datetime) -> str:
    """As a datetime-local input sends it: no offset (read in the zone the form names)."""
    return instant.strftime("%Y-%m-%dT%H:%M:%S")


async def test_a_dry_run_lists_the_occurrences_and_writes_nothing(open_console: Client) -> None:
    body = cron_task("http://127.0.0.1:9/", name="daily", trigger=DAILY)
    assert (await open_console.post("/tasks", json=body)).status_code == 201
    page = await open_console.get("/ui/tasks/daily")
    assert 'action="/ui/tasks/daily/backfill"' in page.text
    start, end, fires = past_range()
    form = {
        "csrf_token": csrf_of(page.text),
        "start": form_time(start),
        "end": form_time(end),
        "overlap": "allow_all",
        "only_missing": "on",
        "dry_run": "on",
    }

    posted = await open_console.post("/ui/tasks/daily/backfill", data=form, follow_redirects=False)
    # A page of its own, read with GET: Back and Reload show it again, posting nothing.
    assert posted.status_code == 303 and "csrf" not in posted.headers["location"]
    shown = await open_console.get(posted.headers["location"])
    reloaded = await open_console.get(posted.headers["location"])

    assert shown.status_code == 200, shown.text
    assert f"{len(fires)} occurrences" in shown.text and "nothing was written" in shown.text
    for fire in fires:
        assert fire.strftime("%Y-%m-%d 03:00:00") in shown.text
    assert reloaded.text.count("<li><time") == len(fires)
    assert (await open_console.get("/runs")).json()["items"] == []


async def test_a_dry_run_offers_to_run_what_it_showed_in_the_task_zone(
    open_console: Client,
) -> None:
    tokyo = {"kind": "cron", "expression": "0 3 * * *", "timezone": "Asia/Tokyo"}
    body = cron_task("http://127.0.0.1:9/", name="daily", trigger=tokyo)
    assert (await open_console.post("/tasks", json=body)).status_code == 201
    page = await open_console.get("/ui/tasks/daily")
    # Both ends at half past an hour, never at a fire time's minute: three days hold three.
    now = datetime.now(UTC).replace(minute=30, second=0, microsecond=0) - timedelta(hours=1)
    form = {
        "csrf_token": csrf_of(page.text),
        "start": form_time(now - timedelta(days=3)),
        "end": form_time(now - timedelta(minutes=1)),
        "overlap": "allow_all",
        "only_missing": "on",
        "dry_run": "on",
    }
    shown = await open_console.post("/ui/tasks/daily/backfill", data=form)
    assert shown.status_code == 200, shown.text
    assert "03:00:00 JST" in shown.text  # each in the task's zone, UTC beneath
    listed = re.findall(r'<li><time datetime="([^"]+)"', shown.text)
    assert len(listed) == 3

    again = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', shown.text))
    assert "dry_run" not in again and again["start"] == form["start"]
    made = await open_console.post("/ui/tasks/daily/backfill", data=again, follow_redirects=False)
    assert made.status_code == 303 and made.headers["location"].startswith("/ui/runs?backfill=")
    heading = (await open_console.get(made.headers["location"])).text
    # In the form's words, not the API's: only_missing and overlap allow_all.
    assert "only occurrences without a succeeded run · all at once" in heading

    backfill_id = made.headers["location"].rpartition("=")[2]
    runs = (await open_console.get("/runs", params={"backfill": backfill_id})).json()["items"]
    assert sorted(run["scheduled_for"] for run in runs) == sorted(
        datetime.fromisoformat(at).astimezone(UTC).isoformat().replace("+00:00", "Z")
        for at in listed
    )


@pytest.mark.parametrize(("enabled", "chosen"), [(True, "buffer_all"), (False, "allow_all")])
async def test_the_form_runs_one_slot_at_a_time_unless_the_task_is_paused(
    open_console: Client, enabled: bool, chosen: str
) -> None:
    body = cron_task("http://127.0.0.1:9/", name="daily", trigger=DAILY, enabled=enabled)
    assert (await open_console.post("/tasks", json=body)).json()["overlap"] == "skip"
    page = (await open_console.get("/ui/tasks/daily")).text
    assert re.search(rf'<option value="{chosen}" selected>', page)
    assert ("keeps no queued runs" in page) is not enabled


async def test_a_form_without_overlap_backfills_one_slot_at_a_time(
    open_console: Client, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", Response(delay=60))  # the first call holds the slot
    body = cron_task(recording_target.url(), name="daily", trigger=DAILY)
    assert (await open_console.post("/tasks", json=body)).status_code == 201
    page = await open_console.get("/ui/tasks/daily")
    start, end, fires = past_range()
    form = {"csrf_token": csrf_of(page.text), "start": form_time(start), "end": form_time(end)}

    shown = await open_console.post("/ui/tasks/daily/backfill", data=form)

    assert shown.status_code == 200 and "/ui/runs?backfill=" in str(shown.url), shown.text
    runs = (await open_console.get("/runs")).json()["items"]
    statuses = sorted(r["status"] for r in runs)
    assert statuses == ["queued"] * (len(fires) - 1) + ["running"]  # one slot: the rest wait
    # Each of them is marked as the backfill's where runs are listed, and names it.
    assert shown.text.count('<span class="tag">backfill</span>') == len(fires)
    task_page = (await open_console.get("/ui/tasks/daily")).text
    assert task_page.count('<span class="tag">backfill</span>') == len(fires)
    run_page = (await open_console.get(f"/ui/runs/{runs[0]['id']}")).text
    assert f'href="/ui/runs?backfill={runs[0]["backfill_id"]}"' in run_page
    # The runs page says what the backfill is, and cancels what of it has not started.
    assert 'Backfill of <a href="/ui/tasks/daily">daily</a>' in shown.text
    assert f"{len(fires)} runs" in shown.text and "Cancel backfill" in shown.text
    backfill_id = runs[0]["backfill_id"]
    cancelled = await open_console.post(
        f"/ui/backfills/{backfill_id}/cancel", data={"csrf_token": csrf_of(shown.text)}
    )
    assert cancelled.status_code == 200 and f"cancelled={len(fires)}" in str(cancelled.url)
    assert f"Backfill cancelled: {len(fires)} of its runs were not finished" in cancelled.text

    async def all_cancelled() -> bool:
        runs = (await open_console.get("/runs")).json()["items"]
        return [r["status"] for r in runs] == ["cancelled"] * len(fires)

    await eventually(all_cancelled, "the running one to stop too")
    assert (await open_console.get(f"/backfills/{backfill_id}")).json()["status"] == "cancelled"
    assert "Cancel backfill" not in cancelled.text


@pytest.mark.parametrize(
    ("change", "field"),
    [({"start": ""}, "start"), ({"end": "yesterday"}, "end"), ({"overlap": "all"}, "overlap")],
)
async def test_a_bad_backfill_form_comes_back_naming_the_field(
    open_console: Client, change: dict[str, str], field: str
) -> None:
    assert (await open_console.post("/tasks", json=cron_task("http://127.0.0.1:9/"))).is_success
    page = await open_console.get("/ui/tasks/nightly-report")
    form = {
        "csrf_token": csrf_of(page.text),
        "start": form_time(past_range()[0]),
        "end": form_time(past_range()[1]),
        "overlap": "allow_all",
        **change,
    }

    shown = await open_console.post("/ui/tasks/nightly-report/backfill", data=form)

    assert shown.status_code == 422
    assert "text/html" in shown.headers["content-type"]
    assert f'id="b-{field}-error"' in shown.text  # beside its input
    assert 'action="/ui/tasks/nightly-report/backfill"' in shown.text
    assert (await open_console.get("/runs")).json()["items"] == []


def _errors_of(page: str) -> dict[str, str]:
    return dict(re.findall(r'<p class="field-error" id="b-(\w+)-error">([^<]*)</p>', page))


async def test_every_bad_field_is_named_and_the_input_is_kept(open_console: Client) -> None:
    assert (await open_console.post("/tasks", json=cron_task("http://127.0.0.1:9/"))).is_success
    page = await open_console.get("/ui/tasks/nightly-report")
    form = {"csrf_token": csrf_of(page.text), "start": "", "end": "yesterday", "dry_run": "on"}

    shown = await open_console.post("/ui/tasks/nightly-report/backfill", data=form)

    assert shown.status_code == 422
    assert set(_errors_of(shown.text)) == {"start", "end"}
    assert 'name="end" type="datetime-local" step="1" required value="yesterday"' in shown.text
    assert 'id="b-dry" name="dry_run" type="checkbox" checked' in shown.text
    assert 'id="b-missing" name="only_missing" type="checkbox">' in shown.text  # left unticked


def _days_ago(days: int) -> str:
    return form_time(datetime.now(UTC) - timedelta(days=days))


@pytest.mark.parametrize(
    ("start", "end", "field", "words"),
    [
        (_days_ago(2), _days_ago(3), "end", "must not be before start"),
        (_days_ago(2), "2999-01-01T00:00:00", "end", "must not be in the future"),
        ("2000-01-01T00:00:00", _days_ago(1), "start", "deleted by its sweep"),
    ],
)
async def test_a_range_the_use_case_refuses_comes_back_with_the_form(
    open_console: Client, start: str, end: str, field: str, words: str
) -> None:
    assert (await open_console.post("/tasks", json=cron_task("http://127.0.0.1:9/"))).is_success
    page = await open_console.get("/ui/tasks/nightly-report")
    form = {"csrf_token": csrf_of(page.text), "start": start, "end": end}

    shown = await open_console.post("/ui/tasks/nightly-report/backfill", data=form)

    assert shown.status_code == 422
    assert words in _errors_of(shown.text)[field]
    assert f'value="{start}"' in shown.text and f'value="{end}"' in shown.text


@pytest.mark.parametrize(("zone", "offset"), [(None, timedelta(hours=9)), ("utc", timedelta(0))])
async def test_the_form_reads_its_times_in_the_task_zone_as_explain_does_or_in_utc(
    open_console: Client, zone: str | None, offset: timedelta
) -> None:
    tokyo = {"kind": "cron", "expression": "0 3 * * *", "timezone": "Asia/Tokyo"}
    body = cron_task("http://127.0.0.1:9/", name="daily", trigger=tokyo)
    assert (await open_console.post("/tasks", json=body)).status_code == 201
    page = await open_console.get("/ui/tasks/daily")
    assert '<option value="task" selected>Asia/Tokyo</option>' in page.text
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=2)
    form = {"csrf_token": csrf_of(page.text), "start": form_time(start), "dry_run": "on"}
    form |= {"end": form_time(start + timedelta(days=1))} | ({"zone": zone} if zone else {})

    shown = await open_console.post("/ui/tasks/daily/backfill", data=form)

    assert shown.status_code == 200, shown.text
    read = re.search(r'<dt>From</dt><dd><time datetime="([^"]+)"', shown.text)
    assert read and datetime.fromisoformat(read[1]) == start - offset
    again = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', shown.text))
    assert again["zone"] == (zone or "task")  # running what was shown reads it alike
    # Another range starts from this one: the form again, filled in.
    assert "<summary>Change the range</summary>" in shown.text
    assert (
        f'id="b-start" name="start" type="datetime-local" step="1" required value="{form["start"]}"'
        in shown.text
    )


async def test_a_zone_the_form_does_not_offer_is_named(open_console: Client) -> None:
    body = cron_task("http://127.0.0.1:9/", name="daily", trigger=DAILY)
    assert (await open_console.post("/tasks", json=body)).status_code == 201
    page = await open_console.get("/ui/tasks/daily")
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=2)
    form = {"csrf_token": csrf_of(page.text), "start": form_time(start), "zone": "mars"}
    form |= {"end": form_time(start + timedelta(days=1))}

    refused = await open_console.post("/ui/tasks/daily/backfill", data=form)
    # Each bad field named at once: a bad zone hid the others (a console audit).
    form |= {"start": "yesterday", "overlap": "bogus"}
    all_bad = await open_console.post("/ui/tasks/daily/backfill", data=form)

    assert refused.status_code == 422
    assert 'id="b-zone-error">must be task or utc' in refused.text
    assert all_bad.status_code == 422
    for field in ("zone", "start", "overlap"):
        assert f'id="b-{field}-error">' in all_bad.text
    assert (await open_console.get("/runs")).json()["items"] == []


@pytest.mark.postgres
@pytest.mark.slow
def test_a_backfill_from_the_task_page_runs_each_occurrence_with_its_key(
    new_page: Any, api: httpx.Client, target: RecordingTarget
) -> None:
    task = create(api, target, trigger=DAILY)
    start, end, fires = past_range()
    page = new_page()
    log_in(page)
    page.goto(f"/ui/tasks/{task['name']}")
    page.get_by_text("Backfill: run past occurrences again").click()
    page.get_by_label("From", exact=True).fill(form_time(start))
    page.get_by_label("To (not in the future)").fill(form_time(end))
    page.get_by_role("button", name="Backfill", exact=True).click()

    page.wait_for_url("**/ui/runs?backfill=*")
    rows = page.locator("table.runs tbody tr")
    expect()(rows).to_have_count(len(fires))
    expect()(page.locator("table.runs")).not_to_contain_text("running", timeout=20_000)
    # key=str: a key is a str (a call without one, None, matches no wanted key).
    keys = sorted(
        (r.header("Idempotency-Key") for r in target.received(f"/{task['name']}")), key=str
    )
    wanted = [f"{task['id']}:{int(fire.timestamp())}" for fire in fires]
    assert keys == wanted
