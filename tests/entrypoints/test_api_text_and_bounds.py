"""Input neither store can hold is a 422 naming the field, on both stores alike
(docs/api.md, "Text" and "Numbers"): a NUL character anywhere in a body, a query or a
path, an integer beyond its documented maximum, a forged cursor. Nothing is written.
Found by Schemathesis against PostgreSQL, where each was a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from application.pagination import encode_cursor
from tests.entrypoints.helpers import cron_task, fields_of

Client = AsyncTestClient[Any]
URL = "http://127.0.0.1:9/hook"


async def no_tasks(api: Client) -> bool:
    items: list[Any] = (await api.get("/tasks")).json()["items"]
    return items == []


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"description": "nightly\u0000"}, "description"),
        ({"target": {"url": URL, "headers": {"X-Team": "a\u0000b"}}}, "target.headers.X-Team"),
        ({"target": {"url": URL, "body": {"rows": ["ok", "\u0000"]}}}, "target.body.rows.1"),
        ({"target": {"url": URL, "body": {"k\u0000": 1}}}, "target.body.k\u0000"),
    ],
)
async def test_a_nul_in_a_created_task_is_a_422_naming_its_field(
    api: Client, fields: dict[str, Any], named: str
) -> None:
    response = await api.post("/tasks", json=cron_task(URL, **fields))

    assert fields_of(response) == [named]
    assert "NUL" in response.json()["errors"][0]["message"]
    assert await no_tasks(api)


async def test_a_nul_in_a_merge_patch_is_a_422_and_the_task_is_unchanged(api: Client) -> None:
    created = (await api.post("/tasks", json=cron_task(URL, description="before"))).json()

    response = await api.patch(
        f"/tasks/{created['id']}",
        content=json.dumps({"description": "after\u0000"}),
        headers={"Content-Type": "application/merge-patch+json"},
    )

    assert fields_of(response) == ["description"]
    task = (await api.get(f"/tasks/{created['id']}")).json()
    assert (task["description"], task["version"]) == ("before", 1)


async def test_a_nul_in_a_query_or_a_path_is_a_422_naming_the_parameter(api: Client) -> None:
    assert fields_of(await api.get("/tasks", params={"tag": "ê\u0000x"})) == ["tag"]
    assert fields_of(await api.get("/runs", params={"tag": "a\u0000"})) == ["tag"]
    assert fields_of(await api.put("/tasks/nightly%00", json=cron_task(URL))) == ["id"]
    assert await no_tasks(api)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"misfire_grace_seconds": 1_657_041_387_826}, "misfire_grace_seconds"),
        ({"pause_after_failures": 2**31}, "pause_after_failures"),
    ],
)
async def test_an_integer_past_its_maximum_is_a_422_naming_it(
    api: Client, fields: dict[str, Any], named: str
) -> None:
    assert fields_of(await api.post("/tasks", json=cron_task(URL, **fields))) == [named]
    assert await no_tasks(api)


async def test_the_largest_documented_values_are_stored_and_read_back(api: Client) -> None:
    body = cron_task(URL, misfire_grace_seconds=315_360_000, pause_after_failures=10_000)

    created = await api.post("/tasks", json=body)

    assert created.status_code == 201, created.text
    task = (await api.get(f"/tasks/{created.json()['id']}")).json()
    assert (task["misfire_grace_seconds"], task["pause_after_failures"]) == (315_360_000, 10_000)


def forged(listing: str, payload: dict[str, Any]) -> str:
    """A cursor of `listing` with a payload the service never issues, carrying the check
    the service would give it (its key is documented, not a secret): what is refused is
    the payload itself. A cursor without a good check is refused before it is read
    (tests/entrypoints/test_api_cursors.py)."""
    return encode_cursor(listing, payload)


@pytest.mark.parametrize(
    "payload",
    [
        {"filter": {"enabled": "yes", "tag": None, "name_prefix": None}, "key": ["x", "y"]},
        {"filter": {"enabled": None, "tag": "a\u0000", "name_prefix": None}, "key": ["x", "y"]},
        {"filter": {"enabled": None, "tag": 7, "name_prefix": None}, "key": ["x", "y"]},
    ],
)
async def test_a_forged_task_cursor_is_a_422_naming_cursor(
    api: Client, payload: dict[str, Any]
) -> None:
    cursor = forged("tasks", payload)
    assert fields_of(await api.get("/tasks", params={"cursor": cursor})) == ["cursor"]


AT = "2026-12-08T00:00:00+00:00"
ID = "7f3c1a52-9d7e-4c1b-8a43-2f6f1e0b9c11"
NO_RUN_FILTER = dict.fromkeys(("status", "task_id", "tag", "since", "until", "backfill_id"))


@pytest.mark.parametrize(
    ("listing", "path", "payload"),
    [
        (
            "tasks",
            "/tasks",
            {"filter": dict.fromkeys(("enabled", "tag", "name_prefix")), "key": [AT, 5]},
        ),
        (
            "tasks",
            "/tasks",
            {"filter": dict.fromkeys(("enabled", "tag", "name_prefix")), "key": [5, ID]},
        ),
        (
            "tasks",
            "/tasks",
            {
                "filter": dict.fromkeys(("enabled", "tag", "name_prefix")),
                "key": ["2026-12-08T00:00:00", ID],
            },
        ),
        ("runs", "/runs", {"filter": NO_RUN_FILTER, "key": [AT, 5]}),
        ("runs", "/runs", {"filter": NO_RUN_FILTER | {"backfill_id": 5}, "key": [AT, ID]}),
        ("runs", "/runs", {"filter": NO_RUN_FILTER | {"task_id": 5}, "key": [AT, ID]}),
        ("runs", "/runs", {"filter": NO_RUN_FILTER | {"since": 5}, "key": [AT, ID]}),
        ("runs", "/runs", {"filter": NO_RUN_FILTER | {"tag": 5}, "key": [AT, ID]}),
        ("events", "/events", {"status": None, "key": [AT, 5]}),
        ("events", "/events", {"status": 0, "key": [AT, ID]}),
    ],
)
async def test_a_forged_cursor_of_the_wrong_types_is_a_422_naming_cursor(
    api: Client, listing: str, path: str, payload: dict[str, Any]
) -> None:
    # Each content of the right name and the wrong JSON type (an id given as a number, an
    # instant without an offset): refused as a cursor, never an error of the server.
    response = await api.get(path, params={"cursor": forged(listing, payload)})
    assert fields_of(response) == ["cursor"], response.text


async def test_a_forged_cursor_of_a_tasks_runs_of_the_wrong_types_is_a_422(api: Client) -> None:
    task = (await api.post("/tasks", json=cron_task(URL))).json()
    for key in ([AT, 5], [5, ID], [AT, None]):
        cursor = forged(f"runs of task {task['id']}", {"status": None, "key": key})
        response = await api.get(f"/tasks/{task['id']}/runs", params={"cursor": cursor})
        assert fields_of(response) == ["cursor"], key


async def test_a_forged_history_cursor_is_a_422_naming_cursor(api: Client) -> None:
    task = (await api.post("/tasks", json=cron_task(URL))).json()
    for before in (2**40, "3", 0, True):
        cursor = forged(f"history of task {task['id']}", {"before": before})
        response = await api.get(f"/tasks/{task['id']}/history", params={"cursor": cursor})
        assert fields_of(response) == ["cursor"], before


@pytest.mark.parametrize(
    ("trigger", "named"),
    [
        ({"kind": "one_shot", "run_at": "9999-12-31T23:59:59-14:00"}, "trigger.run_at"),
        ({"kind": "one_shot", "run_at": "0001-01-01T00:00:00+14:00"}, "trigger.run_at"),
        (
            {"kind": "cron", "expression": "* * * * *", "end_at": "9999-12-31T20:00:00"},
            "trigger.end_at",
        ),
        (
            {"kind": "interval", "every": 60, "anchor": "0001-01-01T05:00:00+08:00"},
            "trigger.anchor",
        ),
    ],
)
async def test_a_trigger_instant_whose_utc_reading_overflows_is_a_422_naming_it(
    api: Client, trigger: dict[str, Any], named: str
) -> None:
    response = await api.post("/tasks", json=cron_task(URL, trigger=trigger))

    assert fields_of(response) == [named]
    assert "out of range" in response.json()["errors"][0]["message"]
    assert await no_tasks(api)
