"""`GET /tasks/{id}/history` through the app (in-memory store), and labelled tokens: the
label of the token a change came with is its actor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from entrypoints.container import build_container
from entrypoints.http.app import create_app
from entrypoints.settings import Access, Grant, load_settings, parse_grants
from tests.entrypoints.helpers import assert_problem, cron_task, fields, make_settings
from tests.fixtures.target import RecordingTarget

Client = AsyncTestClient[Any]
TOKENS = "ops=tok-ops,tok-plain,viewer=tok-view:read"


@pytest.fixture
async def labelled() -> AsyncIterator[Client]:
    app = create_app(build_container(make_settings(api_tokens=TOKENS)))
    async with AsyncTestClient(app=app) as client:
        yield client


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_tokens_may_carry_a_label_and_stay_read_only_with_the_suffix() -> None:
    assert parse_grants("ops=abc, viewer=def:read, plain, c2VjcmV0==, x=eHl6==") == {
        "abc": Grant(Access.WRITE, "ops"),
        "def": Grant(Access.READ, "viewer"),
        "plain": Grant(Access.WRITE, None),
        "c2VjcmV0==": Grant(Access.WRITE, None),  # a base64 token is not split at its "=="
        "eHl6==": Grant(Access.WRITE, "x"),
    }
    with pytest.raises(ValueError, match="two labels"):
        parse_grants("a=tok,b=tok")
    with pytest.raises(ValueError, match="both read-only"):
        parse_grants("a=tok,a=tok:read")
    # A labelled token authenticates as the token alone.
    assert load_settings(api_tokens="ops=abc").tokens == {"abc": Access.WRITE}


async def test_every_change_is_a_version_with_its_actor(
    labelled: Client, recording_target: RecordingTarget
) -> None:
    body = cron_task(recording_target.url(), name="audited", tags=["a"])
    created = await labelled.post("/tasks", json=body, headers=as_("tok-ops"))
    assert created.status_code == 201, created.text
    task_id = created.json()["id"]
    patch = {"description": "now described", "tags": ["a", "b"]}
    assert (
        await labelled.patch("/tasks/audited", json=patch, headers=as_("tok-plain"))
    ).status_code == 200
    assert (await labelled.post("/tasks/audited/pause", headers=as_("tok-ops"))).status_code == 200
    assert (await labelled.post("/tasks/audited/resume", headers=as_("tok-ops"))).status_code == 200
    # A resume that changes nothing makes no version; a read-only token reads the history.
    assert (await labelled.post("/tasks/audited/resume", headers=as_("tok-ops"))).status_code == 200

    response = await labelled.get("/tasks/audited/history", headers=as_("tok-view"))
    assert response.status_code == 200, response.text
    items = response.json()["items"]
    assert [(i["version"], i["actor"], i["cause"]) for i in items] == [
        (4, "ops", "api"),
        (3, "ops", "api"),
        (2, None, "api"),
        (1, "ops", "api"),
    ]
    assert items[0]["changes"] == {"enabled": [False, True]}
    assert items[1]["changes"] == {"enabled": [True, False]}
    assert items[2]["changes"] == {
        "description": [None, "now described"],
        "tags": [["a"], ["a", "b"]],
    }
    assert items[3]["changes"]["name"] == [None, "audited"]
    assert items[3]["changes"]["trigger"][1]["expression"] == "30 2 * * *"
    assert all(item["at"].endswith("Z") for item in items)

    # Paged newest first; the cursor is the task's own.
    first = (
        await labelled.get("/tasks/audited/history", params={"limit": 3}, headers=as_("tok-view"))
    ).json()
    assert [i["version"] for i in first["items"]] == [4, 3, 2]
    rest = await labelled.get(
        "/tasks/audited/history",
        params={"limit": 3, "cursor": first["next_cursor"]},
        headers=as_("tok-view"),
    )
    assert [i["version"] for i in rest.json()["items"]] == [1]
    assert rest.json()["next_cursor"] is None

    # Deleting keeps the history, readable by the id, ending with the deletion.
    assert (await labelled.delete("/tasks/audited", headers=as_("tok-ops"))).status_code == 204
    after = (await labelled.get(f"/tasks/{task_id}/history", headers=as_("tok-view"))).json()
    assert after["items"][0] == {
        "version": 5,
        "at": after["items"][0]["at"],
        "actor": "ops",
        "changes": {"deleted": [False, True]},
        "cause": "api",
    }
    assert (
        await labelled.get("/tasks/audited/history", headers=as_("tok-view"))
    ).status_code == 404


async def test_without_tokens_the_actor_is_null(
    client: Client, recording_target: RecordingTarget
) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url(), name="anonymous"))
    items = (await client.get("/tasks/anonymous/history")).json()["items"]
    assert [(i["version"], i["actor"]) for i in items] == [(1, None)]


async def test_history_of_an_unknown_task_is_404_and_a_bad_cursor_422(
    client: Client, recording_target: RecordingTarget
) -> None:
    assert_problem(await client.get("/tasks/nobody/history"), 404)
    assert_problem(await client.get("/tasks/6f1c0000-0000-4000-8000-000000000000/history"), 404)
    await client.post("/tasks", json=cron_task(recording_target.url(), name="one"))
    await client.post("/tasks", json=cron_task(recording_target.url(), name="two"))
    for _ in range(2):
        await client.post("/tasks/one/pause")
        await client.post("/tasks/one/resume")
    cursor = (await client.get("/tasks/one/history", params={"limit": 1})).json()["next_cursor"]
    problem = assert_problem(await client.get("/tasks/two/history", params={"cursor": cursor}), 422)
    assert fields(problem) == ["cursor"]
    assert fields(
        assert_problem(await client.get("/tasks/one/history", params={"limit": 0}), 422)
    ) == ["limit"]
