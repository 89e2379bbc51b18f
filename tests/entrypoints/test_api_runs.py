"""`GET /runs` through the app (in-memory store): every task's runs, filtered, paged."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest
from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import assert_problem, cron_task, fields
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually

Client = AsyncTestClient[Any]


async def fired(client: Client, task: str) -> dict[str, Any]:
    """A manual run of `task`, once it finished."""
    response = await client.post(f"/tasks/{task}/runs")
    assert response.status_code == 202, response.text
    run_id = response.json()["id"]

    async def probe() -> dict[str, Any] | None:
        run: dict[str, Any] = (await client.get(f"/runs/{run_id}")).json()
        return run if run["status"] != "running" else None

    return await eventually(probe)


async def listed(client: Client, **params: Any) -> list[dict[str, Any]]:
    """Every page of `GET /runs` with `params`, following the cursors."""
    items: list[dict[str, Any]] = []
    query = dict(params)
    while True:
        response = await client.get("/runs", params=query)
        assert response.status_code == 200, response.text
        page = response.json()
        items.extend(page["items"])
        if page["next_cursor"] is None:
            return items
        # The cursor carries the filters: only it (and the page size) is sent on.
        query = {"cursor": page["next_cursor"], "limit": params.get("limit", 50)}


@pytest.fixture
async def three_tasks(client: Client, recording_target: RecordingTarget) -> list[dict[str, Any]]:
    recording_target.respond("/fail", Response(500))
    bodies = [
        cron_task(recording_target.url("/ok"), name="alpha", tags=["team-a"]),
        cron_task(recording_target.url("/fail"), name="beta", tags=["team-a", "team-b"]),
        cron_task(recording_target.url("/ok"), name="gamma"),
    ]
    runs = []
    for body in bodies:
        assert (await client.post("/tasks", json=body)).status_code == 201
    for name in ("alpha", "beta", "gamma", "alpha", "beta"):
        runs.append(await fired(client, name))
    return runs


def newest_first(runs: list[dict[str, Any]]) -> list[str]:
    ordered = sorted(runs, key=lambda run: (run["scheduled_for"], run["id"]), reverse=True)
    return [run["id"] for run in ordered]


def ids(runs: list[dict[str, Any]]) -> list[str]:
    return [run["id"] for run in runs]


async def test_runs_of_every_task_with_filters_and_cursors(
    client: Client, three_tasks: list[dict[str, Any]]
) -> None:
    runs = three_tasks
    assert ids(await listed(client)) == newest_first(runs)
    assert ids(await listed(client, limit=2)) == newest_first(runs)
    assert ids(await listed(client, task="alpha")) == newest_first([runs[0], runs[3]])
    by_id = await listed(client, task=runs[1]["task_id"], limit=1)
    assert ids(by_id) == newest_first([runs[1], runs[4]])
    assert ids(await listed(client, status="failed", limit=1)) == newest_first([runs[1], runs[4]])
    assert ids(await listed(client, tag="team-a", status="succeeded", limit=1)) == newest_first(
        [runs[0], runs[3]]
    )
    first = min(run["scheduled_for"] for run in runs)
    assert ids(await listed(client, since=first, until=first, limit=1)) == newest_first(
        [run for run in runs if run["scheduled_for"] == first]
    )
    assert await listed(client, task="nobody") == []
    assert await listed(client, backfill=str(uuid4())) == []
    assert all(run["backfill_id"] is None for run in await listed(client))


async def test_a_deleted_tasks_runs_stay_listed_by_its_id(
    client: Client, three_tasks: list[dict[str, Any]]
) -> None:
    gamma = three_tasks[2]
    assert (await client.delete("/tasks/gamma")).status_code == 204
    assert ids(await listed(client, task=gamma["task_id"])) == [gamma["id"]]
    assert await listed(client, task="gamma") == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "done"}, "status"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-03-01T00:00:00"}, "since"),
        ({"since": "2026-03-02T00:00:00Z", "until": "2026-03-01T00:00:00Z"}, "until"),
        ({"backfill": "not-a-uuid"}, "backfill"),
        ({"limit": "0"}, "limit"),
        ({"limit": "501"}, "limit"),
        ({"cursor": "bm90LWEtY3Vyc29y"}, "cursor"),
    ],
)
async def test_bad_filters_are_rejected_naming_the_field(
    client: Client, params: dict[str, str], field: str
) -> None:
    problem = assert_problem(await client.get("/runs", params=params), 422)
    assert fields(problem) == [field]


async def test_attempts_is_written_when_the_run_ends(
    api: Client, recording_target: RecordingTarget
) -> None:
    # docs/api.md ("Run", `attempts`): kept in the calling process until the run ends,
    # so a running run reads 0 even once its target was called.
    recording_target.respond("/slow", Response(delay=30))
    await api.post("/tasks", json=cron_task(recording_target.url("/slow"), name="slow"))
    run_id = (await api.post("/tasks/slow/runs")).json()["id"]

    async def called() -> bool:
        return bool(recording_target.received("/slow"))

    await eventually(called, "the target called")
    running = (await api.get(f"/runs/{run_id}")).json()
    assert running["status"] == "running"
    assert running["attempts"] == 0 and running["http_status"] is None

    assert (await api.post(f"/runs/{run_id}/cancel")).status_code == 202

    async def ended() -> dict[str, Any] | None:
        run: dict[str, Any] = (await api.get(f"/runs/{run_id}")).json()
        return run if run["status"] != "running" else None

    cancelled = await eventually(ended, "the run cancelled")
    assert cancelled["status"] == "cancelled" and cancelled["attempts"] == 1
