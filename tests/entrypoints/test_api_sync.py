"""Declarative sync through the app (in-memory store): `PUT /tasks/{name}` and
`POST /tasks/apply`."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import assert_problem, fields
from tests.fixtures.target import RecordingTarget

Client = AsyncTestClient[Any]


def spec(target: RecordingTarget, **fields: Any) -> dict[str, Any]:
    return {
        "trigger": {"kind": "interval", "every": 3600},
        "target": {"url": target.url("/sync")},
        **fields,
    }


async def names(client: Client) -> set[str]:
    return {task["name"] for task in (await client.get("/tasks")).json()["items"]}


async def history(client: Client, name: str) -> list[int]:
    items = (await client.get(f"/tasks/{name}/history")).json()["items"]
    return [item["version"] for item in items]


async def test_put_creates_replaces_and_leaves_an_equal_task_alone(
    client: Client, recording_target: RecordingTarget
) -> None:
    created = await client.put("/tasks/synced", json=spec(recording_target, tags=["a"]))
    assert created.status_code == 201, created.text
    assert created.headers["etag"] == '"1"'
    task = created.json()
    assert (task["name"], task["tags"], task["version"]) == ("synced", ["a"], 1)

    # The same spec again: unchanged, same version, same schedule (the interval's anchor
    # the scheduler filled in is kept).
    again = await client.put("/tasks/synced", json=spec(recording_target, tags=["a"]))
    assert again.status_code == 200
    assert (again.json()["version"], again.json()["trigger"]) == (1, task["trigger"])
    assert await history(client, "synced") == [1]

    # Replaced whole: a field left out takes its default.
    replaced = await client.put(
        "/tasks/synced", json=spec(recording_target, description="d"), headers={"If-Match": '"1"'}
    )
    assert replaced.status_code == 200, replaced.text
    body = replaced.json()
    assert (body["tags"], body["description"], body["version"]) == ([], "d", 2)
    assert body["trigger"] == task["trigger"]  # anchored as before: the schedule stays
    assert await history(client, "synced") == [2, 1]

    stale = await client.put(
        "/tasks/synced", json=spec(recording_target), headers={"If-Match": '"1"'}
    )
    assert_problem(stale, 412)
    exists = await client.put(
        "/tasks/synced", json=spec(recording_target), headers={"If-None-Match": "*"}
    )
    assert_problem(exists, 412)
    missing = await client.put(
        "/tasks/other", json=spec(recording_target), headers={"If-Match": '"1"'}
    )
    assert_problem(missing, 412)
    only_new = await client.put(
        "/tasks/other", json=spec(recording_target), headers={"If-None-Match": "*"}
    )
    assert only_new.status_code == 201
    assert (await client.get("/tasks/synced")).json()["version"] == 2


async def test_put_rejects_bad_specs_naming_the_field_and_writes_nothing(
    client: Client, recording_target: RecordingTarget
) -> None:
    bad = spec(recording_target)
    bad["trigger"] = {"kind": "cron", "expression": "61 * * * *"}
    assert fields(assert_problem(await client.put("/tasks/x", json=bad), 422)) == [
        "trigger.expression"
    ]
    renamed = spec(recording_target, name="y")
    assert fields(assert_problem(await client.put("/tasks/x", json=renamed), 422)) == ["name"]
    assert fields(
        assert_problem(await client.put("/tasks/bad name", json=spec(recording_target)), 422)
    ) == ["name"]
    assert await names(client) == set()


async def test_apply_makes_the_stored_tasks_match_in_one_go(
    client: Client, recording_target: RecordingTarget
) -> None:
    for name, tags in (
        ("keep", ["team"]),
        ("change", ["team"]),
        ("stale", ["team"]),
        ("other", []),
    ):
        assert (
            await client.put(f"/tasks/{name}", json=spec(recording_target, tags=tags))
        ).status_code == 201
    body = {
        "tasks": [
            {"name": "keep", **spec(recording_target, tags=["team"])},
            {"name": "change", **spec(recording_target, tags=["team"], jitter_seconds=5)},
            {"name": "new", **spec(recording_target, tags=["team"])},
        ],
        "prune": True,
        "selector": {"tag": "team"},
    }
    expected = {
        "created": ["new"],
        "updated": ["change"],
        "unchanged": ["keep"],
        "deleted": ["stale"],
        # The diff a reviewer reads before the deploy: each updated task's fields.
        "changes": {"change": {"jitter_seconds": [0, 5]}},
    }
    dry = await client.post("/tasks/apply", json={**body, "dry_run": True})
    assert dry.status_code == 200, dry.text
    assert dry.json() == expected
    assert await names(client) == {"keep", "change", "stale", "other"}

    applied = await client.post("/tasks/apply", json=body)
    assert applied.status_code == 200, applied.text
    assert applied.json() == expected
    assert await names(client) == {"keep", "change", "new", "other"}
    assert (await client.get("/tasks/keep")).json()["version"] == 1
    assert (await client.get("/tasks/change")).json()["jitter_seconds"] == 5
    # Applying again changes nothing.
    again = (await client.post("/tasks/apply", json=body)).json()
    assert again == {
        "created": [],
        "updated": [],
        "unchanged": ["keep", "change", "new"],
        "deleted": [],
        "changes": {},
    }


async def test_apply_is_all_or_nothing(client: Client, recording_target: RecordingTarget) -> None:
    await client.put("/tasks/existing", json=spec(recording_target))
    bad = spec(recording_target)
    bad["target"]["timeout_seconds"] = -1
    body = {
        "tasks": [{"name": "fine", **spec(recording_target)}, {"name": "broken", **bad}],
        "prune": True,
    }
    problem = assert_problem(await client.post("/tasks/apply", json=body), 422)
    assert fields(problem) == ["tasks[1].target.timeout_seconds"]
    twice = {
        "tasks": [{"name": "a", **spec(recording_target)}, {"name": "a", **spec(recording_target)}]
    }
    assert fields(assert_problem(await client.post("/tasks/apply", json=twice), 422)) == [
        "tasks[1].name"
    ]
    unknown = {"tasks": [], "prun": True}
    assert fields(assert_problem(await client.post("/tasks/apply", json=unknown), 422)) == ["prun"]
    nameless = {"tasks": [spec(recording_target)]}
    assert fields(assert_problem(await client.post("/tasks/apply", json=nameless), 422)) == [
        "tasks[0].name"
    ]
    assert await names(client) == {"existing"}


async def test_apply_names_every_refused_task_at_once(
    client: Client, recording_target: RecordingTarget
) -> None:
    # Checks made after the specs parse (the outbound guard, a one-shot already past,
    # a calendar that is not stored, a repeated name) named only the first task they
    # refused: a file with three such tasks took three round trips to mend.
    denied = spec(recording_target)
    denied["target"]["url"] = "http://169.254.169.254/latest/"
    past = {
        **spec(recording_target),
        "trigger": {"kind": "one_shot", "run_at": "2020-01-01T00:00:00Z"},
    }
    closed = spec(recording_target)
    closed["trigger"]["calendar"] = {"name": "nowhere", "policy": "exclude"}
    body = {
        "tasks": [
            {"name": "denied", **denied},
            {"name": "fine", **spec(recording_target)},
            {"name": "past", **past},
            {"name": "closed", **closed},
            {"name": "fine", **spec(recording_target)},
            {"name": "denied-too", **denied},
            {"name": "zero", **spec(recording_target, max_running_instances=0)},
        ]
    }
    problem = assert_problem(await client.post("/tasks/apply", json=body), 422)

    # Also beside a spec whose own fields are refused: one answer names them all.
    assert fields(problem) == [
        "tasks[0].target.url",
        "tasks[2].trigger.run_at",
        "tasks[3].trigger.calendar.name",
        "tasks[4].name",
        "tasks[5].target.url",
        "tasks[6].max_running_instances",
    ]
    assert await names(client) == set()


async def test_apply_takes_a_body_past_the_one_mebibyte_limit_of_other_routes(
    client: Client, recording_target: RecordingTarget
) -> None:
    # 300 tasks of about 7 KiB: 2 MiB, refused anywhere else, one request here.
    tasks = [
        {"name": f"bulk-{i}", **spec(recording_target, description="d" * 7_000)} for i in range(300)
    ]
    body = {"tasks": tasks}
    elsewhere = await client.post("/tasks", json={**tasks[0], "description": "d" * 2_000_000})
    assert_problem(elsewhere, 413)
    applied = await client.post("/tasks/apply", json=body)
    assert applied.status_code == 200, applied.text
    assert applied.json()["created"] == [f"bulk-{i}" for i in range(300)]
    stored = await client.get("/tasks/bulk-299")
    assert stored.json()["description"] == "d" * 7_000


async def test_apply_refuses_a_body_past_its_own_limit_and_writes_nothing(
    client: Client, recording_target: RecordingTarget
) -> None:
    padding = "d" * 9_000
    tasks = [
        {"name": f"huge-{i}", **spec(recording_target, description=padding)}
        for i in range(2_000)  # about 18 MiB
    ]
    refused = await client.post("/tasks/apply", json={"tasks": tasks})
    assert_problem(refused, 413)
    assert await names(client) == set()


async def test_an_empty_selector_is_refused_rather_than_pruning_everything(
    client: Client, recording_target: RecordingTarget
) -> None:
    # A deploy template whose tag came out empty once pruned every task not listed.
    for name in ("mine", "theirs"):
        await client.put(f"/tasks/{name}", json=spec(recording_target))
    body = {"tasks": [{"name": "mine", **spec(recording_target)}], "prune": True}

    refused = await client.post("/tasks/apply", json={**body, "selector": {}})

    assert fields(assert_problem(refused, 422)) == ["selector.tag"]
    assert await names(client) == {"mine", "theirs"}
    # Left out, the selector is every task: that is said, not slipped into.
    pruned = await client.post("/tasks/apply", json=body)
    assert pruned.json()["deleted"] == ["theirs"]
