"""The console's calendar pages over HTTP on the in-memory store: a calendar's dates and
the tasks that name it, escaping, and the list paged with a way back."""

from __future__ import annotations

import re

from tests.console.test_console_pages import Client, create
from tests.console.test_console_pages import open_console as open_console  # fixture
from tests.entrypoints.helpers import cron_task


async def test_the_calendar_pages_list_calendars_their_dates_and_tasks(
    open_console: Client,
) -> None:
    assert "No calendar yet" in (await open_console.get("/ui/calendars")).text
    body = {"name": "closures", "description": "<b>shut</b>", "dates": ["2030-12-24"]}
    assert (await open_console.post("/calendars", json=body)).status_code == 201
    trigger = {"kind": "cron", "expression": "0 9 * * *", "calendar": {"name": "closures"}}
    await create(open_console, cron_task("http://127.0.0.1:9/hook", trigger=trigger), token=None)
    listing = (await open_console.get("/ui/calendars")).text
    assert 'href="/ui/calendars/closures"' in listing
    assert "&lt;b&gt;shut&lt;/b&gt;" in listing and "<b>shut" not in listing
    page = await open_console.get("/ui/calendars/closures")
    assert page.status_code == 200
    assert 'href="/ui/tasks/nightly-report"' in page.text and "2030-12-24" in page.text
    task_page = (await open_console.get("/ui/tasks/nightly-report")).text
    assert 'href="/ui/calendars/closures"' in task_page
    assert "a fire time on one of its dates does not fire" in task_page
    missing = await open_console.get("/ui/calendars/nope")
    assert missing.status_code == 404 and "no calendar" in missing.text


async def test_the_calendars_pages_list_each_calendar_once_with_a_way_back(
    open_console: Client,
) -> None:
    names = [f"closures-{i:02d}" for i in range(51)]  # one more than a page holds
    for name in names:
        body = {"name": name, "dates": ["2030-12-24"]}
        assert (await open_console.post("/calendars", json=body)).status_code == 201

    first = (await open_console.get("/ui/calendars")).text
    more = re.search(r'rel="next" href="([^"]+)">More calendars</a>', first)
    assert more and "First calendars" not in first
    second = (await open_console.get(more.group(1).replace("&amp;", "&"))).text

    listed = re.findall(r'href="/ui/calendars/(closures-\d\d)"', first + second)
    assert sorted(listed) == names
    assert 'rel="next"' not in second
    assert '<a href="/ui/calendars">First calendars</a>' in second
