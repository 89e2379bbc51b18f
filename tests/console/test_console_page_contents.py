"""What the console's pages say and keep, over HTTP on the in-memory store (fast): the
filters of every list on every page, the words of times, captions, history and empty
lists, forms and filters sent back with their errors, and errors as console pages."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.console.test_console_pages import Client, create, csrf_of
from tests.console.test_console_pages import open_console as open_console  # fixture
from tests.entrypoints.helpers import cron_task
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually


async def test_the_task_pages_run_filter_is_kept_on_every_page(open_console: Client) -> None:
    # Slots for all 26: with one, a run fired while the last one was still being
    # recorded was skipped, not failed (seen under CI's load).
    body = cron_task("http://127.0.0.1:9/", max_running_instances=26)
    task = await create(open_console, body, token=None)
    empty = (await open_console.get("/ui/tasks/nightly-report")).text
    assert "No runs yet." in empty and "Macro" not in empty
    for _ in range(26):  # one more than a page; the outbound guard fails each at once
        assert (await open_console.post(f"/tasks/{task['id']}/runs")).status_code == 202

    async def all_failed() -> bool:
        runs = (await open_console.get(f"/runs?task={task['id']}&status=failed&limit=100")).json()
        return len(runs["items"]) == 26

    await eventually(all_failed, "26 failed runs")
    none = (await open_console.get("/ui/tasks/nightly-report?status=succeeded")).text
    assert "No run with status succeeded." in none
    assert '<option value="succeeded" selected>' in none
    first = (await open_console.get("/ui/tasks/nightly-report?status=failed")).text
    assert '<option value="failed" selected>' in first
    older = re.search(r'rel="next" href="([^"]+)"', first)
    assert older and "status=failed" in older.group(1)
    second = (await open_console.get(older.group(1).replace("&amp;", "&"))).text
    assert second.count('<a href="/ui/runs/') == 1
    assert '<option value="failed" selected>' in second
    newest = re.search(r'href="([^"]+)">Newest runs</a>', second)
    assert newest and newest.group(1) == "/ui/tasks/nightly-report?status=failed"
    assert (await open_console.get(newest.group(1))).status_code == 200


async def test_the_upcoming_caption_says_what_the_timeline_draws(open_console: Client) -> None:
    every_15 = {"kind": "interval", "every": 900}
    daily = {"kind": "cron", "expression": "0 3 * * *", "timezone": "UTC"}
    later = {**daily, "start_at": "2031-01-01T00:00:00Z"}
    for name, trigger in (("dense", every_15), ("daily", daily), ("later", later)):
        await create(open_console, cron_task("http://127.0.0.1:9/", name, trigger=trigger), None)

    def caption(page: str) -> str:
        found = re.search(r"<figcaption>(.*?)</figcaption>", page)
        assert found, "the task page has no timeline"
        return found.group(1)

    def listed(page: str) -> int:
        return page.split('class="fire-times"')[1].split("</ol>")[0].count("<li>")

    dense = (await open_console.get("/ui/tasks/dense")).text
    # 672 fire times in the 7 days: the 100 fetched cover a day, and the caption says so.
    assert re.fullmatch(
        r"The first 100 fire times, up to \w{3} \d\d:\d\d — more follow; ticks at midnight, UTC\.",
        caption(dense),
    )
    # No count of them anywhere (a form's random CSRF token may hold the digits).
    assert not re.search(r"\b672\b", re.sub(r'value="[0-9a-f]+"', "", dense))
    days = (await open_console.get("/ui/tasks/daily")).text
    assert caption(days).startswith(
        "7 fire times in the next 7 days, 3 more in the list of next fire times;"
    )
    assert listed(days) == 10
    none = (await open_console.get("/ui/tasks/later")).text
    assert caption(none).startswith(
        "0 fire times in the next 7 days, 10 more in the list of next fire times;"
    )
    assert listed(none) == 10
    resumed_words = "Paused: these are the fire times it would have if it were resumed now."
    assert resumed_words not in days
    await open_console.post("/tasks/daily/pause")
    assert resumed_words in (await open_console.get("/ui/tasks/daily")).text
    once = {"kind": "one_shot", "run_at": "2031-01-01T00:00:00Z"}
    await create(open_console, cron_task("http://127.0.0.1:9/", "once", trigger=once), None)
    assert (
        "<summary>The next fire time</summary>" in (await open_console.get("/ui/tasks/once")).text
    )


async def daily_around_the_weekend(console: Client, policy: str) -> str:
    """The page of a task firing daily at 09:00 UTC under `policy` around a weekend
    calendar."""
    await console.post("/calendars", json={"name": "weekend", "weekdays": ["SAT", "SUN"]})
    trigger = {
        "kind": "cron",
        "expression": "0 9 * * *",
        "timezone": "UTC",
        "calendar": {"name": "weekend", "policy": policy},
    }
    await create(console, cron_task("http://127.0.0.1:9/", "daily", trigger=trigger), None)
    return (await console.get("/ui/tasks/daily")).text


async def test_the_wall_times_that_do_not_fire_are_those_among_the_listed(
    open_console: Client,
) -> None:
    # Weekdays at 09:00 with the weekend excluded: the 10 listed fire times span two
    # weeks, so two to four weekend dates do not fire among them (two when the page is
    # read on a Sunday after 09:00), not the ~40 of the 100 fetched for the timeline.
    page = await daily_around_the_weekend(open_console, "exclude")
    found = re.search(
        r"<summary>(\d+) wall times? \(\S+\) up to the last of these that do not fire", page
    )
    assert found, "the page lists no wall times that do not fire"
    gone = page.split('class="omitted"')[1].split("</ul>")[0].count("<li>")
    assert gone == int(found.group(1))
    assert 2 <= gone <= 4


async def test_a_wall_time_rolled_onto_a_fire_time_is_said_in_words(open_console: Client) -> None:
    # Daily at 09:00 rolled forward around the weekend: each Sunday lands on Monday's own
    # 09:00, which fires once; ten listed fire times span at least one such Sunday.
    page = await daily_around_the_weekend(open_console, "next_business_day")
    told = page.split('class="omitted"')[1].split("</ul>")[0]
    assert "rolled onto a fire time it has anyway, which fires once (calendar weekend)" in told


async def test_a_task_firing_every_second_past_a_year_of_held_dates_says_the_list_is_cut(
    open_console: Client,
) -> None:
    # Every second excluded on the next 400 dates: tens of millions of wall times do
    # not fire before the first listed fire time; the page tells the first 1,000 and
    # says there are more (it stepped every one of them, for minutes, before).
    today = datetime.now(UTC).date()
    held = [(today + timedelta(days=k)).isoformat() for k in range(400)]
    await open_console.post("/calendars", json={"name": "closed", "dates": held})
    trigger = {
        "kind": "cron",
        "expression": "* * * * * *",
        "timezone": "UTC",
        "calendar": {"name": "closed", "policy": "exclude"},
    }
    await create(open_console, cron_task("http://127.0.0.1:9/", "dense", trigger=trigger), None)

    page = (await open_console.get("/ui/tasks/dense")).text
    assert (
        "<summary>More than 1000 wall times (UTC) up to the last of these that do not fire" in page
    )
    assert "The first 1000 of them:" in page
    assert page.split('class="omitted"')[1].split("</ul>")[0].count("<li>") == 1000
    first_free = (today + timedelta(days=400)).isoformat()
    assert first_free in page.split('class="fire-times"')[1].split("</ol>")[0]


async def test_a_run_cancelled_from_the_console_says_so_and_whole_seconds_are_shown(
    open_console: Client, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", Response(delay=60))  # hangs until cancelled
    task = await create(open_console, cron_task(recording_target.url()), token=None)
    run = (await open_console.post(f"/tasks/{task['id']}/runs")).json()

    async def running() -> bool:
        status: str = (await open_console.get(f"/runs/{run['id']}")).json()["status"]
        return status == "running"

    await eventually(running, "the run to start")
    page = await open_console.get(f"/ui/runs/{run['id']}")
    cancelled = await open_console.post(
        f"/ui/runs/{run['id']}/cancel", data={"csrf_token": csrf_of(page.text)}
    )
    assert cancelled.status_code == 200
    said = ("Cancel requested: the run stops shortly", "Cancelled: the run was stopped")
    assert any(words in cancelled.text for words in said)  # it may have ended already
    assert 'role="status"' in cancelled.text

    async def ended() -> dict[str, Any] | None:
        answer: dict[str, Any] = (await open_console.get(f"/runs/{run['id']}")).json()
        return answer if answer["status"] == "cancelled" else None

    assert (await eventually(ended, "the run to end"))["error"] == "cancelled from the console"
    # The page the cancel led to, read again once the run ended, says it is done.
    after = (await open_console.get(f"/ui/runs/{run['id']}?done=cancel-requested")).text
    assert "Cancelled: the run was stopped" in after and "Cancel requested" not in after
    shown = (await open_console.get(f"/ui/runs/{run['id']}")).text
    assert re.search(r"· took (under 1|\d+) s<", shown), shown
    assert re.search(r"· (on time|\d+ s late)<", shown), shown
    assert not re.search(r"\d\.\d+ s", shown)


async def test_the_dry_run_shows_the_body_as_it_would_be_sent(open_console: Client) -> None:
    body = {"zeta": "café & 'tea' <b>", "alpha": [1, 2]}
    target = {"url": "http://127.0.0.1:9/", "body": body}
    await create(open_console, cron_task("http://127.0.0.1:9/", target=target), token=None)
    page = await open_console.get("/ui/tasks/nightly-report")
    assert 'href="/ui/tasks/nightly-report/dry-run"' in page.text
    dry = await open_console.get("/ui/tasks/nightly-report/dry-run")
    assert dry.status_code == 200
    shown = re.search(r'aria-label="The rendered request">(.*?)</pre>', dry.text, re.S)
    assert shown and "<b>" not in shown.group(1)  # escaped, so shown as text
    lines = html.unescape(shown.group(1)).splitlines()
    assert lines[-1] == """{"zeta":"café & 'tea' <b>","alpha":[1,2]}"""
    assert lines[-2] == ""  # a blank line between the headers and the body, as sent


async def test_unknown_console_paths_and_methods_are_console_pages(open_console: Client) -> None:
    for path, method, status in (
        ("/ui/nonexistent", "GET", 404),
        ("/ui/tasks/x/extra", "GET", 404),
        ("/ui/tasks/x/pause", "GET", 405),
    ):
        answer = await open_console.request(method, path)
        assert answer.status_code == status, path
        assert answer.headers["content-type"].startswith("text/html"), path
        assert "default-src 'none'" in answer.headers["content-security-policy"], path
        assert answer.headers["cache-control"] == "no-store"
        assert "Back to the tasks" in answer.text
    assert "POST" in (await open_console.get("/ui/tasks/x/pause")).headers["allow"]
    api = await open_console.get("/nonexistent")  # the API keeps its problem documents
    assert api.status_code == 404
    assert api.headers["content-type"].startswith("application/problem+json")


async def test_every_page_names_its_icon_so_no_favicon_ico_is_asked_for(
    open_console: Client,
) -> None:
    page = (await open_console.get("/ui/")).text
    icon = re.search(r'<link rel="icon" href="([^"]+)"', page)
    assert icon and icon.group(1).startswith("/ui/static/")
    answer = await open_console.get(icon.group(1))
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("image/svg+xml")


async def test_without_tokens_the_login_page_says_none_is_needed(open_console: Client) -> None:
    page = await open_console.get("/ui/login")
    assert page.status_code == 200
    assert "No token is needed" in page.text and 'href="/ui/"' in page.text
    assert "asks for an API token" not in page.text and 'name="token"' not in page.text


async def test_the_words_of_empty_lists_and_of_the_last_run(open_console: Client) -> None:
    await create(open_console, cron_task("http://127.0.0.1:9/"), token=None)
    backfill = f"{'0' * 8}-0000-0000-0000-{'0' * 12}"
    runs = (await open_console.get(f"/ui/runs?backfill={backfill}")).text
    assert "No run matches these filters." in runs
    task = (await open_console.get("/ui/tasks/nightly-report")).text
    # The API's last_run_at counts scheduled runs only: the label says so.
    assert "<dt>Last scheduled run</dt><dd>none yet" in task
    assert "(manual runs do not count)" in task


async def test_the_filters_stay_in_the_form_and_the_links_on_every_page(
    open_console: Client,
) -> None:
    for index in range(52):
        body = cron_task("http://127.0.0.1:9/", name=f"bulk-{index:02d}", enabled=False)
        await create(open_console, body, token=None)
    await create(open_console, cron_task("http://127.0.0.1:9/", name="bulk-on"), token=None)

    first = (await open_console.get("/ui/?name=bulk&state=paused")).text
    following = re.search(r'rel="next" href="([^"]+)"', first)
    assert following
    second = (await open_console.get(html.unescape(following.group(1)))).text
    assert second.count('<th scope="row"') == 2  # 52 paused: 50, then 2
    assert 'id="f-name" name="name" value="bulk"' in second
    assert '<option value="paused" selected>' in second
    back = re.search(r'href="([^"]+)">First page</a>', second)
    assert back and html.unescape(back.group(1)) == "/ui/?name=bulk&state=paused"

    task = (await open_console.get("/tasks/bulk-on")).json()
    for _ in range(51):  # one more than a page of runs
        assert (await open_console.post(f"/tasks/{task['id']}/runs")).status_code == 202
    runs_first = (await open_console.get("/ui/runs?task=bulk-on")).text
    assert "Runs matching the filters, newest first</caption>" in runs_first
    every = (await open_console.get("/ui/runs")).text
    assert "Runs of every task, newest first</caption>" in every
    older = re.search(r'rel="next" href="([^"]+)"', runs_first)
    assert older
    runs_second = (await open_console.get(html.unescape(older.group(1)))).text
    assert 'id="r-task" name="task" value="bulk-on"' in runs_second
    newest = re.search(r'href="([^"]+)">Newest runs</a>', runs_second)
    assert newest and html.unescape(newest.group(1)) == "/ui/runs?task=bulk-on"


async def test_history_shows_the_members_that_changed_each_value_cut_alone(
    open_console: Client,
) -> None:
    target = {"url": "http://127.0.0.1:9/", "headers": {"X-Report": "first"}}
    task = await create(open_console, cron_task("http://127.0.0.1:9/", target=target), None)
    change = {
        "target": {"url": "http://127.0.0.1:9/new", "headers": {"X-Report": "2nd"}},
        "description": "x" * 300,
    }
    assert (await open_console.patch(f"/tasks/{task['id']}", json=change)).status_code == 200

    page = (await open_console.get("/ui/tasks/nightly-report")).text
    newest = page.split('id="history-h"')[1].split("</tr>")[1]  # the first row: version 2
    items = [html.unescape(item) for item in re.findall(r"<li>(.*?)</li>", newest)]
    assert (
        '<code>target.url</code>: <code>"http://127.0.0.1:9/"</code>'
        ' → <code>"http://127.0.0.1:9/new"</code>'
    ) in items
    assert '<code>target.headers.X-Report</code>: <code>"first"</code> → <code>"2nd"</code>' in (
        items
    )
    assert not any(item.startswith("<code>target</code>") for item in items)
    description = next(item for item in items if item.startswith("<code>description</code>"))
    assert description.endswith(f'<code>"{"x" * 118}…</code>')
    # Version 1 lists what the task was made with, as values (not changes from null),
    # and not the fields it left unset.
    first = page.split('id="history-h"')[1].split('id="definition-h"')[0].split("</tr>")[2]
    assert "<p>Created with:</p>" in first
    made = [html.unescape(item) for item in re.findall(r"<li>(.*?)</li>", first)]
    assert '<code>name</code>: <code>"nightly-report"</code>' in made
    assert not any(item.endswith("<code>null</code>") or "→" in item for item in made)


async def test_a_bad_filter_is_named_on_its_list_with_the_form_kept(open_console: Client) -> None:
    runs = await open_console.get("/ui/runs?task=nightly&since=yesterday&until=later")
    assert runs.status_code == 422
    assert 'role="alert"' in runs.text
    assert "<code>since</code>" in runs.text and "<code>until</code>" in runs.text
    assert 'id="r-since" name="since" type="datetime-local" step="1" value="yesterday"' in runs.text
    assert 'id="r-task" name="task" value="nightly"' in runs.text
    status = await open_console.get("/ui/runs?task=nightly&status=bogus")
    assert status.status_code == 422
    assert "<code>status</code> must be one of running, succeeded, failed" in status.text
    assert 'id="r-task" name="task" value="nightly"' in status.text
    tasks = await open_console.get("/ui/?name=bulk&state=bogus")
    assert tasks.status_code == 422
    assert "<code>state</code>" in tasks.text and "task_state" not in tasks.text
    assert 'id="f-name" name="name" value="bulk"' in tasks.text
    assert "No task matches" not in tasks.text


async def test_the_count_of_failures_is_said_in_words_that_agree_with_it(
    open_console: Client, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", *[Response(500)] * 10)
    for failures, words in ((1, "· 1 consecutive failure<"), (2, "· 2 consecutive failures<")):
        # Paused automatically after that many failures in a row: the count holds still.
        body = cron_task(recording_target.url(), name=f"failing-{failures}") | {
            "trigger": {"kind": "interval", "every": 1},
            "pause_after_failures": failures,
        }
        task = await create(open_console, body, token=None)

        async def paused(path: str = f"/tasks/{task['id']}") -> bool:
            return (await open_console.get(path)).json()["enabled"] is False

        await eventually(paused, f"the task to pause after {failures} failure(s)")
        assert words in (await open_console.get(f"/ui/tasks/{task['id']}")).text


async def test_the_runs_of_a_task_that_does_not_exist_say_so(open_console: Client) -> None:
    await create(open_console, cron_task("http://127.0.0.1:9/", "quiet"), None)

    unknown = (await open_console.get("/ui/runs", params={"task": "nosuch"})).text
    assert "No task has the name or id “nosuch”" in unknown
    none_yet = (await open_console.get("/ui/runs", params={"task": "quiet"})).text
    assert "No run matches these filters." in none_yet and "No task has" not in none_yet
