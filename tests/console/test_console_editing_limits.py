"""The console's editor takes what the API takes (docs/api.md, "Console"): a task as
large as a body may be is shown whole and saves again; a refused edit says what changed
since its form was opened, and by whom, and offers no Save that could only fail again."""

from __future__ import annotations

import json

from tests.console.test_console_editing import definition_of, errors_of, hidden_of, text_of
from tests.console.test_console_pages import Client, create
from tests.console.test_console_pages import open_console as open_console  # fixture
from tests.entrypoints.helpers import cron_task

DAILY = {"kind": "cron", "expression": "30 2 * * *", "timezone": "America/New_York"}


async def test_a_task_near_the_apis_largest_body_is_shown_whole_and_saves_unchanged(
    open_console: Client,
) -> None:
    # 300,000 short items: about 900 KB as the API takes it, 2.7 MB indented.
    body = cron_task("http://127.0.0.1:9/", name="large", trigger=DAILY)
    body["target"] |= {"method": "POST", "body": {"ids": [0] * 300_000}}
    assert len(json.dumps(body)) < 1024 * 1024
    await create(open_console, body, None)

    editor = await open_console.get("/ui/tasks/large/edit")
    assert definition_of(editor.text)["target"]["body"] == {"ids": [0] * 300_000}
    saved = await open_console.post(
        "/ui/tasks/large/edit",
        data={**hidden_of(editor.text, "/ui/tasks/large/edit"), "definition": text_of(editor.text)},
        follow_redirects=False,
    )

    assert saved.status_code == 303, errors_of(saved.text)
    assert saved.headers["location"] == "/ui/tasks/large?done=unchanged"


async def test_a_definition_past_the_limit_is_refused_naming_it_not_cut_short(
    open_console: Client,
) -> None:
    form = await open_console.get("/ui/new-task")
    assert "maxlength" not in form.text.split('id="definition"')[1].split(">")[0]
    body = cron_task("http://127.0.0.1:9/", name="too-large", trigger=DAILY)
    body["description"] = "x" * (2 * 1024 * 1024)

    refused = await open_console.post(
        "/ui/new-task",
        data={**hidden_of(form.text, "/ui/new-task"), "definition": json.dumps(body)},
    )

    assert refused.status_code == 422
    assert errors_of(refused.text) == {"definition": "is longer than 2097152 characters"}
    assert len(text_of(refused.text)) == len(json.dumps(body))  # kept whole, as typed
    assert (await open_console.get("/tasks/too-large")).status_code == 404


async def test_a_task_larger_than_a_body_of_the_api_is_refused_though_the_text_fits(
    open_console: Client,
) -> None:
    form = await open_console.get("/ui/new-task")
    body = cron_task("http://127.0.0.1:9/", name="too-large", trigger=DAILY)
    body["target"] |= {"method": "POST", "body": {"blob": "x" * 1_100_000}}
    assert (await open_console.post("/tasks", json=body)).status_code == 413  # as the API

    refused = await open_console.post(
        "/ui/new-task",
        data={**hidden_of(form.text, "/ui/new-task"), "definition": json.dumps(body)},
    )

    assert refused.status_code == 422
    size = len(json.dumps(body, separators=(",", ":")))
    assert errors_of(refused.text) == {
        "definition": f"is {size:,} bytes as compact JSON; a task may be at most 1,048,576"
        " (1 MiB), as a body of the API"
    }
    assert (await open_console.get("/tasks/too-large")).status_code == 404


async def test_a_refused_edit_lists_what_changed_since_and_by_whom(open_console: Client) -> None:
    await create(open_console, cron_task("http://127.0.0.1:9/", name="daily", trigger=DAILY), None)
    editor = await open_console.get("/ui/tasks/daily/edit")
    hidden, definition = hidden_of(editor.text, "/ui/tasks/daily/edit"), definition_of(editor.text)
    meanwhile = await open_console.patch("/tasks/daily", json={"tags": ["meanwhile"]})
    assert meanwhile.status_code == 200
    definition["description"] = "mine"

    stale = await open_console.post(
        "/ui/tasks/daily/edit", data={**hidden, "definition": json.dumps(definition)}
    )

    assert stale.status_code == 409
    assert "What changed since this form was opened (version 1):" in stale.text
    since = stale.text.split("What changed since")[1].split("</table>")[0]
    assert '<th scope="row" data-label="Version">2</th>' in since
    assert "<code>tags</code>: <code>[]</code> → <code>[&#34;meanwhile&#34;]</code>" in since
    assert 'type="submit"' not in stale.text.split('class="editor"')[1]  # no Save to fail
    assert definition_of(stale.text)["description"] == "mine"
