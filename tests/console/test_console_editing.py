"""The console's task editor (docs/api.md, "Console"): a new task, a definition edited,
a task deleted, each through the API's own use case: what the console writes reads back
from the API as written, a refused definition comes back as typed with its fields named
and nothing written, and a change made meanwhile is never overwritten."""

from __future__ import annotations

import html
import json
import re
from typing import Any

from tests.console.test_console_pages import (
    READER,
    WRITER,
    Client,
    _client,
    create,
    csrf_of,
    log_in,
)
from tests.console.test_console_pages import open_console as open_console  # fixture
from tests.entrypoints.helpers import cron_task

DAILY = {"kind": "cron", "expression": "30 2 * * *", "timezone": "America/New_York"}


def definition_of(page: str) -> dict[str, Any]:
    """The JSON the editor's text area holds."""
    loaded: dict[str, Any] = json.loads(text_of(page))
    return loaded


def text_of(page: str) -> str:
    """The editor's text area, as typed (even when it is not JSON)."""
    found = re.search(r'<textarea id="definition"[^>]*>(.*?)</textarea>', page, re.S)
    assert found, "the page has no definition to edit"
    return html.unescape(found.group(1))


def errors_of(page: str) -> dict[str, str]:
    return {
        field: html.unescape(message)
        for field, message in re.findall(r"<li><code>([^<]*)</code> ([^<]*)</li>", page)
    }


def hidden_of(page: str, action: str) -> dict[str, str]:
    """The hidden fields of the form posting to `action`, as a browser sends them."""
    form = re.search(rf'<form method="post" action="{re.escape(action)}".*?</form>', page, re.S)
    assert form, f"the page has no form posting to {action}"
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form[0]))


def version_of(page: str) -> str:
    found = re.search(r'name="version" value="(\d*)"', page)
    assert found, "the form carries no version"
    return found.group(1)


async def _tasks(client: Client) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await client.get("/tasks")).json()["items"]
    return items


async def test_a_task_made_in_the_console_reads_back_from_the_api_as_written(
    open_console: Client,
) -> None:
    form = await open_console.get("/ui/new-task")
    assert form.status_code == 200
    body = definition_of(form.text)  # an example that is itself a valid task
    body.update(name="made-here", target={"url": "http://127.0.0.1:9/hook", "method": "PUT"})

    made = await open_console.post(
        "/ui/new-task",
        data={"csrf_token": csrf_of(form.text), "definition": json.dumps(body)},
        follow_redirects=False,
    )

    assert (
        made.status_code == 303 and made.headers["location"] == "/ui/tasks/made-here?done=created"
    )
    stored = (await open_console.get("/tasks/made-here")).json()
    assert stored["trigger"] == body["trigger"] | {"start_at": None, "end_at": None}
    assert stored["tags"] == body["tags"]
    assert stored["target"]["url"] == "http://127.0.0.1:9/hook"
    assert stored["target"]["method"] == "PUT"
    shown = (await open_console.get(made.headers["location"])).text
    assert "Created: the task fires at its next time." in shown


async def test_a_refused_definition_comes_back_as_typed_and_nothing_is_written(
    open_console: Client,
) -> None:
    csrf = csrf_of((await open_console.get("/ui/new-task")).text)
    bad_cron = json.dumps(
        {
            "name": "bad",
            "trigger": {"kind": "cron", "expression": "61 * * * *"},
            "target": {"url": "http://169.254.169.254/latest"},
        }
    )
    not_json = '{"name": "half",\n  "trigger": {'

    refused = await open_console.post(
        "/ui/new-task", data={"csrf_token": csrf, "definition": bad_cron}
    )
    broken = await open_console.post(
        "/ui/new-task", data={"csrf_token": csrf, "definition": not_json}
    )

    assert refused.status_code == 422 and broken.status_code == 422
    assert set(errors_of(refused.text)) == {"trigger.expression"}
    assert definition_of(refused.text) == json.loads(bad_cron)  # as typed
    assert errors_of(broken.text)["definition"].startswith("is not JSON: ")
    assert "at line 2, column" in errors_of(broken.text)["definition"]
    assert text_of(broken.text) == not_json
    # The guard's refusal comes from the same use case, once the trigger is good.
    guarded = json.loads(bad_cron) | {"trigger": DAILY}
    denied = await open_console.post(
        "/ui/new-task", data={"csrf_token": csrf, "definition": json.dumps(guarded)}
    )
    assert denied.status_code == 422 and "target.url" in errors_of(denied.text)
    nul = guarded | {"target": {"url": "http://127.0.0.1:9/"}, "description": "a\u0000b"}
    named = await open_console.post(
        "/ui/new-task", data={"csrf_token": csrf, "definition": json.dumps(nul)}
    )
    assert set(errors_of(named.text)) == {"description"}  # as the API's 422 names it
    twice = json.dumps(guarded | {"target": {"url": "http://127.0.0.1:9/"}, "enabled": False})
    twice = twice[:-1] + ', "enabled": true}'  # the first would be dropped silently
    repeated = await open_console.post(
        "/ui/new-task", data={"csrf_token": csrf, "definition": twice}
    )
    assert repeated.status_code == 422 and text_of(repeated.text) == twice
    assert errors_of(repeated.text)["definition"] == (
        "enabled: given twice in one object: give each member once"
    )
    assert await _tasks(open_console) == []


async def test_an_edit_writes_a_version_and_an_unchanged_one_does_not(
    open_console: Client,
) -> None:
    await create(open_console, cron_task("http://127.0.0.1:9/", name="daily", trigger=DAILY), None)
    editor = await open_console.get("/ui/tasks/daily/edit")
    hidden = hidden_of(editor.text, "/ui/tasks/daily/edit")
    definition = definition_of(editor.text)
    assert definition["trigger"] == DAILY | {"start_at": None, "end_at": None}
    assert hidden["version"] == "1"

    same = await open_console.post(
        "/ui/tasks/daily/edit",
        data={**hidden, "definition": json.dumps(definition)},
        follow_redirects=False,
    )
    definition["trigger"] = DAILY | {"expression": "45 3 * * *"}
    del definition["tags"]  # left out: its default, as PUT /tasks/{name} takes it
    changed = await open_console.post(
        "/ui/tasks/daily/edit",
        data={**hidden, "definition": json.dumps(definition)},
        follow_redirects=False,
    )

    assert same.headers["location"] == "/ui/tasks/daily?done=unchanged"
    assert changed.headers["location"] == "/ui/tasks/daily?done=saved"
    stored = (await open_console.get("/tasks/daily")).json()
    assert stored["version"] == 2 and stored["trigger"]["expression"] == "45 3 * * *"
    newest = (await open_console.get("/tasks/daily/history")).json()["items"][0]
    assert newest["version"] == 2 and set(newest["changes"]) == {"trigger"}


async def test_an_edit_from_a_stale_form_is_refused_and_nothing_written(
    open_console: Client,
) -> None:
    await create(open_console, cron_task("http://127.0.0.1:9/", name="daily", trigger=DAILY), None)
    editor = await open_console.get("/ui/tasks/daily/edit")
    hidden, definition = hidden_of(editor.text, "/ui/tasks/daily/edit"), definition_of(editor.text)
    assert (
        await open_console.patch("/tasks/daily", json={"tags": ["meanwhile"]})
    ).status_code == 200
    definition["description"] = "mine"

    stale = await open_console.post(
        "/ui/tasks/daily/edit", data={**hidden, "definition": json.dumps(definition)}
    )
    stale_rename = await open_console.post(
        "/ui/tasks/daily/edit",
        data={**hidden, "definition": json.dumps(definition | {"name": "x"})},
    )

    assert stale.status_code == 409 and "changed since this form was opened" in stale.text
    assert version_of(stale.text) == "1"  # sent again, it is refused again
    assert definition_of(stale.text)["description"] == "mine"  # what was typed is kept
    assert stale_rename.status_code == 409
    stored = (await open_console.get("/tasks/daily")).json()
    assert stored["version"] == 2 and stored["tags"] == ["meanwhile"]
    assert stored["description"] is None
    assert (await open_console.get("/tasks/x")).status_code == 404


async def test_a_changed_name_renames_the_task_and_a_taken_one_is_refused(
    open_console: Client,
) -> None:
    task = await create(
        open_console, cron_task("http://127.0.0.1:9/", name="daily", trigger=DAILY), None
    )
    await create(open_console, cron_task("http://127.0.0.1:9/", name="weekly"), None)
    editor = await open_console.get("/ui/tasks/daily/edit")
    hidden, definition = hidden_of(editor.text, "/ui/tasks/daily/edit"), definition_of(editor.text)

    taken = await open_console.post(
        "/ui/tasks/daily/edit",
        data={**hidden, "definition": json.dumps(definition | {"name": "weekly"})},
    )
    assert taken.status_code == 422
    assert errors_of(taken.text)["name"] == "'weekly' is another task's name; nothing was written"
    assert definition_of(taken.text)["name"] == "weekly"  # what was typed is kept
    assert (await open_console.get("/tasks/daily")).json()["version"] == 1

    renamed = await open_console.post(
        "/ui/tasks/daily/edit",
        data={**hidden, "definition": json.dumps(definition | {"name": "every-morning"})},
        follow_redirects=False,
    )

    assert renamed.headers["location"] == "/ui/tasks/every-morning?done=saved"
    stored = (await open_console.get("/tasks/every-morning")).json()
    assert (stored["id"], stored["version"]) == (task["id"], 2)
    assert stored["trigger"]["expression"] == DAILY["expression"]  # the schedule kept
    assert (await open_console.get("/tasks/daily")).status_code == 404
    newest = (await open_console.get("/tasks/every-morning/history")).json()["items"][0]
    assert newest["changes"] == {"name": ["daily", "every-morning"]}


async def test_a_delete_is_confirmed_and_only_of_the_version_shown(open_console: Client) -> None:
    task = await create(open_console, cron_task("http://127.0.0.1:9/", name="daily"), None)
    run = (await open_console.post(f"/tasks/{task['id']}/runs")).json()
    confirm = await open_console.get("/ui/tasks/daily/delete")
    assert confirm.status_code == 200 and "Delete daily?" in confirm.text
    hidden = hidden_of(confirm.text, "/ui/tasks/daily/delete")
    assert (await open_console.post("/tasks/daily/pause")).status_code == 200  # version 2

    stale = await open_console.post("/ui/tasks/daily/delete", data=hidden)
    assert stale.status_code == 409 and (await open_console.get("/tasks/daily")).status_code == 200
    deleted = await open_console.post(
        "/ui/tasks/daily/delete", data={**hidden, "version": "2"}, follow_redirects=False
    )

    assert deleted.headers["location"] == "/ui/?deleted=daily"
    assert (await open_console.get("/tasks/daily")).status_code == 404
    assert (await open_console.get(f"/runs/{run['id']}")).status_code == 200
    said = "Deleted daily: it will not fire again"
    assert said in (await open_console.get("/ui/?deleted=daily")).text
    # Said only while no task has that name: a kept link says nothing of a new one.
    await create(open_console, cron_task("http://127.0.0.1:9/", name="daily"), None)
    assert said not in (await open_console.get("/ui/?deleted=daily")).text


async def test_a_link_cannot_make_the_delete_notice_say_other_words(open_console: Client) -> None:
    """`?deleted=` is said only of what could be a task's name (an audit sent a link
    whose page said "Deleted production-billing (and all its runs were purged)")."""
    for words in ("billing (and all its runs were purged)", "<img src=x>", "..", "a b"):
        page = await open_console.get("/ui/", params={"deleted": words})
        assert page.status_code == 200 and "Deleted" not in page.text
    assert "Deleted billing:" in (await open_console.get("/ui/?deleted=billing")).text


async def test_a_stale_form_never_acts_on_another_task_of_the_same_name(
    open_console: Client,
) -> None:
    await create(open_console, cron_task("http://127.0.0.1:9/", name="daily", trigger=DAILY), None)
    editor = await open_console.get("/ui/tasks/daily/edit")
    confirm = await open_console.get("/ui/tasks/daily/delete")
    edit_form = hidden_of(editor.text, "/ui/tasks/daily/edit")
    delete_form = hidden_of(confirm.text, "/ui/tasks/daily/delete")
    mine = definition_of(editor.text) | {"description": "mine"}
    # Meanwhile the task is deleted, and a colleague makes another of that name.
    assert (await open_console.delete("/tasks/daily")).status_code == 204
    theirs = cron_task("http://127.0.0.1:9/", name="daily", trigger=DAILY)
    theirs |= {"description": "theirs", "tags": ["keep"], "enabled": False}
    new = await create(open_console, theirs, None)
    assert new["version"] == 1  # the version the old forms carry

    saved = await open_console.post(
        "/ui/tasks/daily/edit", data={**edit_form, "definition": json.dumps(mine)}
    )
    deleted = await open_console.post("/ui/tasks/daily/delete", data=delete_form)

    assert saved.status_code == 409 and "replaced by another of its name" in saved.text
    assert definition_of(saved.text)["description"] == "mine"  # the text is kept
    assert deleted.status_code == 409
    stored = (await open_console.get("/tasks/daily")).json()
    assert stored["id"] == new["id"] and stored["version"] == 1
    assert (stored["description"], stored["tags"], stored["enabled"]) == ("theirs", ["keep"], False)
    # Its task gone for good, the text of an edit comes back as a new task's.
    assert (await open_console.delete("/tasks/daily")).status_code == 204
    gone = await open_console.post(
        "/ui/tasks/daily/edit", data={**edit_form, "definition": json.dumps(mine)}
    )
    assert gone.status_code == 409 and "deleted or renamed since" in gone.text
    assert 'action="/ui/new-task"' in gone.text and definition_of(gone.text) == mine


async def test_a_number_python_cannot_read_comes_back_as_a_field_error(
    open_console: Client,
) -> None:
    csrf = csrf_of((await open_console.get("/ui/new-task")).text)
    huge = '{"name": "t", "trigger": {"kind": "interval", "every": ' + "9" * 5000 + "}}"

    answer = await open_console.post("/ui/new-task", data={"csrf_token": csrf, "definition": huge})

    assert answer.status_code == 422
    assert errors_of(answer.text)["definition"] == (
        "holds an integer of more than 4,300 digits, which no field takes"
    )
    assert text_of(answer.text) == huge
    # What Python reads and JSON has not is refused as such, not stored as a float.
    for spelled, words in (("NaN", "NaN is not a JSON number"), ("1e400", "1e400 is past")):
        bad = '{"name": "t", "trigger": {"kind": "interval", "every": ' + spelled + "}}"
        answer = await open_console.post(
            "/ui/new-task", data={"csrf_token": csrf, "definition": bad}
        )
        assert answer.status_code == 422
        assert words in errors_of(answer.text)["definition"]


async def test_a_task_made_paused_is_said_to_be_paused(open_console: Client) -> None:
    csrf = csrf_of((await open_console.get("/ui/new-task")).text)
    body = cron_task("http://127.0.0.1:9/", name="later", trigger=DAILY) | {"enabled": False}

    made = await open_console.post(
        "/ui/new-task", data={"csrf_token": csrf, "definition": json.dumps(body)}
    )

    assert "Created, paused: the task fires once it is resumed." in made.text


async def test_a_read_only_token_sees_no_editor_and_cannot_post_to_it() -> None:
    async for client in _client(f"{WRITER},{READER}:read"):
        await create(client, cron_task("http://127.0.0.1:9/", name="daily"))
        await log_in(client, READER)
        listing = await client.get("/ui/")
        task_page = await client.get("/ui/tasks/daily")
        assert "/ui/new-task" not in listing.text
        assert "/ui/tasks/daily/edit" not in task_page.text
        assert "/ui/tasks/daily/delete" not in task_page.text
        for path in ("/ui/new-task", "/ui/tasks/daily/edit", "/ui/tasks/daily/delete"):
            assert (await client.get(path)).status_code == 403, path
        csrf = csrf_of(task_page.text)  # the logout form's
        body = json.dumps({"name": "x", "trigger": DAILY, "target": {"url": "http://127.0.0.1:9/"}})
        for path, data in (
            ("/ui/new-task", {"definition": body}),
            ("/ui/tasks/daily/edit", {"definition": body, "version": "1"}),
            ("/ui/tasks/daily/delete", {"version": "1", "task_id": "x"}),
        ):
            answer = await client.post(path, data={"csrf_token": csrf, **data})
            assert answer.status_code == 403, path
        writer = {"Authorization": f"Bearer {WRITER}"}
        assert [
            t["name"] for t in (await client.get("/tasks", headers=writer)).json()["items"]
        ] == ["daily"]


async def test_a_form_without_the_csrf_token_writes_nothing(open_console: Client) -> None:
    await open_console.get("/ui/")  # the session's cookie
    body = json.dumps({"name": "x", "trigger": DAILY, "target": {"url": "http://127.0.0.1:9/"}})
    answer = await open_console.post("/ui/new-task", data={"definition": body})
    assert answer.status_code == 403
    assert await _tasks(open_console) == []
