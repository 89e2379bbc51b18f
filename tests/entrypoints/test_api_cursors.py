"""Cursors as a client meets them, on both stores (docs/api.md, "Numbers" and each list):
every list pages with its own `next_cursor`; a cursor edited by hand, or one another
list issued (another kind of list, or the same kind for another task), is a 422 naming
`cursor`, and the lists are as they were."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import cron_task, fields_of
from tests.fixtures.target import RecordingTarget

Client = AsyncTestClient[Any]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def payload_of(cursor: str) -> dict[str, Any]:
    """What a cursor carries: its first part is base64url JSON (opaque to clients, but
    readable, which is what a hand edit starts from)."""
    data = cursor.split(".")[0]
    loaded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)))
    return loaded


def edited(cursor: str, **changes: Any) -> str:
    """The cursor with its payload changed by hand, its check left as it was."""
    check = cursor.split(".")[1]
    payload = payload_of(cursor) | changes
    return f"{b64(json.dumps(payload).encode())}.{check}"


def unchecked(cursor: str) -> str:
    """The cursor's payload alone, without its check (as cursors were once written)."""
    return cursor.split(".")[0]


async def ids(api: Client, path: str, **params: Any) -> list[str]:
    response = await api.get(path, params=params)
    assert response.status_code == 200, response.text
    return [item.get("id", item.get("version")) for item in response.json()["items"]]


@pytest.fixture
async def lists(api: Client, recording_target: RecordingTarget) -> dict[str, str]:
    """Two tasks (three versions and three runs each), two calendars: each list
    below has more than one page at `limit=1`. Their paths, by name."""
    for name in ("a", "b"):
        body = cron_task(recording_target.url(), name, tags=["t"], max_running_instances=5)
        assert (await api.post("/tasks", json=body)).status_code == 201
        for _ in range(3):
            assert (await api.post(f"/tasks/{name}/runs")).status_code == 202
    for name in ("a", "b"):
        for description in ("v2", "v3"):
            await api.patch(f"/tasks/{name}", json={"description": description})
    for name in ("closures", "holidays"):
        assert (await api.post("/calendars", json={"name": name})).status_code == 201
    return {
        "tasks": "/tasks",
        "runs of a": "/tasks/a/runs",
        "runs of b": "/tasks/b/runs",
        "all runs": "/runs",
        "history of a": "/tasks/a/history",
        "history of b": "/tasks/b/history",
        "calendars": "/calendars",
    }


async def first_cursor(api: Client, path: str, **params: Any) -> str:
    page = (await api.get(path, params={"limit": 1, **params})).json()
    cursor: str | None = page["next_cursor"]
    assert cursor is not None, path
    return cursor


async def test_every_list_pages_with_its_own_cursor(api: Client, lists: dict[str, str]) -> None:
    for name, path in lists.items():
        everything = await ids(api, path)
        cursor = await first_cursor(api, path)

        first = await ids(api, path, limit=1)
        second = await ids(api, path, limit=1, cursor=cursor)

        assert first + second == everything[:2], name


async def test_a_cursor_another_list_issued_is_a_422_naming_cursor(
    api: Client, lists: dict[str, str]
) -> None:
    cursors = {name: await first_cursor(api, path) for name, path in lists.items()}
    paths = {**lists, "events": "/events"}
    for issued_by, cursor in cursors.items():
        for name, path in paths.items():
            if name == issued_by:
                continue
            response = await api.get(path, params={"cursor": cursor})
            assert fields_of(response) == ["cursor"], (issued_by, name)
            assert "another list" in response.json()["errors"][0]["message"]


async def test_a_cursor_of_another_tasks_runs_is_a_422(api: Client, lists: dict[str, str]) -> None:
    of_a = await first_cursor(api, "/tasks/a/runs")

    response = await api.get("/tasks/b/runs", params={"cursor": of_a})

    assert fields_of(response) == ["cursor"]
    message = response.json()["errors"][0]["message"]
    task_a = (await api.get("/tasks/a")).json()["id"]
    assert f"runs of task {task_a}" in message
    # a's cursor still pages a's runs.
    assert len(await ids(api, "/tasks/a/runs", cursor=of_a)) == 2


@pytest.mark.parametrize(
    ("path", "changes"),
    [
        ("/tasks", {"filter": {"enabled": None, "tag": "other", "name_prefix": None}}),
        ("/tasks", {"key": ["2000-01-01T00:00:00+00:00", "00000000-0000-0000-0000-000000000000"]}),
        ("/tasks/a/runs", {"status": "failed"}),
        ("/runs", {"key": ["9999-01-01T00:00:00+00:00", "00000000-0000-0000-0000-000000000000"]}),
        ("/tasks/a/history", {"before": 3}),
        ("/calendars", {"after": "a"}),
    ],
)
async def test_a_cursor_edited_by_hand_is_a_422_naming_cursor_and_nothing_changes(
    api: Client, lists: dict[str, str], path: str, changes: dict[str, Any]
) -> None:
    everything = await ids(api, path)
    cursor = await first_cursor(api, path)

    for bad in (edited(cursor, **changes), unchecked(cursor), cursor[:-2], cursor + "A"):
        response = await api.get(path, params={"cursor": bad})
        assert fields_of(response) == ["cursor"], bad

    assert await ids(api, path) == everything
    assert await ids(api, path, limit=1, cursor=cursor) == everything[1:2]


async def test_an_edited_task_list_cursor_does_not_widen_its_filter(
    api: Client, lists: dict[str, str], recording_target: RecordingTarget
) -> None:
    await api.post("/tasks", json=cron_task(recording_target.url(), "c", tags=["u"]))
    cursor = await first_cursor(api, "/tasks", tag="t")
    assert payload_of(cursor)["filter"]["tag"] == "t"

    response = await api.get("/tasks", params={"cursor": edited(cursor, filter={"tag": "u"})})

    assert fields_of(response) == ["cursor"]
    assert "edited" in response.json()["errors"][0]["message"]
    # The cursor as issued pages the tagged tasks only, without `c`.
    assert await ids(api, "/tasks", cursor=cursor) == (await ids(api, "/tasks", tag="t"))[1:]


@pytest.mark.parametrize(
    ("path", "first", "other"),
    [
        ("/tasks", {"tag": "t"}, {"tag": "u"}),
        ("/tasks", {"tag": "t"}, {"name": "a"}),
        ("/tasks", {}, {"enabled": "false"}),
        ("/runs", {"status": "succeeded"}, {"status": "failed"}),
        ("/runs", {"task": "a"}, {"task": "b"}),
        ("/runs", {"tag": "t"}, {"since": "2026-01-01T00:00:00Z"}),
        ("/tasks/a/runs", {}, {"status": "queued"}),
    ],
)
async def test_a_filter_sent_beside_a_cursor_must_be_the_cursors(
    api: Client,
    lists: dict[str, str],
    path: str,
    first: dict[str, str],
    other: dict[str, str],
) -> None:
    # A cursor keeps the filters of its first page. Sent again beside it they page on;
    # another filter is a 422 naming it, rather than a page of what the caller did not
    # ask for (an outside audit got `sent` events asking for `pending` ones).
    cursor = await first_cursor(api, path, **first)
    expected = (await ids(api, path, **first))[1:2]

    assert await ids(api, path, limit=1, cursor=cursor, **first) == expected
    response = await api.get(path, params={"limit": 1, "cursor": cursor, **other})

    assert response.status_code == 422, response.text
    assert fields_of(response) == list(other)
    assert "the cursor was issued for" in response.json()["errors"][0]["message"]
