"""The console's events page (docs/api.md, "Console"): the outbox as `GET /events` lists
it, newest first, filtered by status, with what each delivery met."""

from __future__ import annotations

import html
import re

from tests.console.test_console_pages import Client, create
from tests.console.test_console_pages import open_console as open_console  # fixture
from tests.entrypoints.helpers import cron_task
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually

DAILY = {"kind": "cron", "expression": "30 2 * * *", "timezone": "UTC"}


async def test_the_events_page_lists_each_event_with_its_delivery(
    open_console: Client, recording_target: RecordingTarget
) -> None:
    # The receiver refuses: the event stays pending, its last answer said.
    recording_target.respond("/events", Response(503, b"not now"))
    recording_target.respond("/hook", Response(500, b"broken"))  # a failed run: an event
    notify = {"url": recording_target.url("/events"), "events": ["run.failed"]}
    body = cron_task(recording_target.url("/hook"), name="notified", trigger=DAILY)
    task = await create(open_console, body | {"notify": notify}, None)
    run = (await open_console.post(f"/tasks/{task['id']}/runs")).json()

    async def answered() -> bool:
        # `attempts` counts an attempt from its claim; its answer is written after it.
        items = (await open_console.get("/events")).json()["items"]
        return bool(items) and items[0]["http_status"] is not None

    await eventually(answered, "the answer to the event's first attempt")
    page = await open_console.get("/ui/events")
    pending = await open_console.get("/ui/events?status=pending")
    sent = await open_console.get("/ui/events?status=sent")

    assert page.status_code == 200
    row = html.unescape(page.text.split("<tbody>")[1].split("</tr>")[0])
    assert "run.failed" in row and f'href="/ui/runs/{run["id"]}"' in row
    assert 'href="/ui/tasks/notified"' in row and "pending" in row
    assert "HTTP 503" in row and recording_target.url("/events") in row
    assert "run.failed" in pending.text
    assert "No event is sent." in sent.text
    assert '<a href="/ui/events" aria-current="page">Events</a>' in page.text


async def test_a_status_it_does_not_know_is_named_with_the_form_kept(
    open_console: Client,
) -> None:
    refused = await open_console.get("/ui/events?status=nosuch")

    assert refused.status_code == 422
    assert re.search(r"<code>status</code> must be one of pending, sent, dropped", refused.text)
    assert '<option value="" selected>any</option>' not in refused.text  # nosuch kept
