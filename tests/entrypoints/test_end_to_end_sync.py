"""The real server over real HTTP, on both stores: runs across tasks, task history,
declarative sync."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from httpx import AsyncClient

from tests.entrypoints.helpers import cron_task
from tests.entrypoints.live import LiveServer
from tests.entrypoints.test_end_to_end import LONG_POLL, api, create, server, store_environ
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually

__all__ = ["api", "server", "store_environ"]  # fixtures this module's tests use


async def finished(api: AsyncClient, task: str) -> dict[str, Any]:
    run_id = (await api.post(f"/tasks/{task}/runs")).json()["id"]

    async def probe() -> dict[str, Any] | None:
        run: dict[str, Any] = (await api.get(f"/runs/{run_id}")).json()
        return run if run["status"] != "running" else None

    return await eventually(probe)


async def test_runs_of_every_task_filtered_and_paged(
    api: AsyncClient, recording_target: RecordingTarget
) -> None:
    await create(api, cron_task(recording_target.url(), name="one", tags=["e2e"]))
    await create(api, cron_task(recording_target.url(), name="two"))
    runs = [await finished(api, name) for name in ("one", "two", "one")]

    pages, query = [], {"limit": "1", "tag": "e2e"}
    while True:
        page = (await api.get("/runs", params=query)).json()
        pages.append(page["items"])
        if page["next_cursor"] is None:
            break
        query = {"limit": "1", "cursor": page["next_cursor"]}
    ones = sorted([runs[0], runs[2]], key=lambda r: (r["scheduled_for"], r["id"]), reverse=True)
    assert [run["id"] for items in pages for run in items] == [run["id"] for run in ones]
    every = (await api.get("/runs", params={"status": "succeeded"})).json()["items"]
    assert {run["id"] for run in every} == {run["id"] for run in runs}
    assert all(run["backfill_id"] is None for run in every)
    by_name = (await api.get("/runs", params={"task": "two"})).json()["items"]
    assert [run["id"] for run in by_name] == [runs[1]["id"]]
    bad = await api.get("/runs", params={"since": "2026-03-01T00:00:00"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "since"


@pytest.fixture
def labelled_server(store_environ: dict[str, str]) -> Iterator[LiveServer]:
    tokens = "deployer=e2e-deploy-token,e2e-anonymous-token"
    with LiveServer({**store_environ, **LONG_POLL, "SCHEDULER_API_TOKENS": tokens}) as live:
        yield live


async def test_history_records_each_change_with_the_token_label(
    labelled_server: LiveServer, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/fail", Response(500))
    deployer = {"Authorization": "Bearer e2e-deploy-token"}
    anonymous = {"Authorization": "Bearer e2e-anonymous-token"}
    async with AsyncClient(base_url=labelled_server.url, timeout=10) as api:
        body = cron_task(recording_target.url("/fail"), name="audited", pause_after_failures=1)
        created = await api.post("/tasks", json=body, headers=deployer)
        assert created.status_code == 201, created.text
        patched = await api.patch("/tasks/audited", json={"tags": ["x"]}, headers=anonymous)
        assert patched.status_code == 200
        # A scheduled run that fails pauses the task by itself: make one due now.
        interval = {"trigger": {"kind": "interval", "every": 3600}}
        assert (await api.patch("/tasks/audited", json=interval, headers=deployer)).is_success

        async def paused() -> dict[str, Any] | None:
            task: dict[str, Any] = (await api.get("/tasks/audited", headers=deployer)).json()
            return task if not task["enabled"] else None

        await eventually(paused, within=15)
        history = await api.get("/tasks/audited/history", headers=anonymous)
        assert history.status_code == 200, history.text
        items = history.json()["items"]
        assert [(i["version"], i["actor"], i["cause"]) for i in items] == [
            (4, None, "auto_pause"),
            (3, "deployer", "api"),
            (2, None, "api"),
            (1, "deployer", "api"),
        ]
        assert items[0]["changes"] == {"enabled": [True, False]}
        assert items[1]["changes"]["trigger"][1]["kind"] == "interval"
        assert items[2]["changes"] == {"tags": [[], ["x"]]}
        assert (await api.delete("/tasks/audited", headers=deployer)).status_code == 204
        gone = await api.get(f"/tasks/{created.json()['id']}/history", headers=deployer)
        assert gone.json()["items"][0]["changes"] == {"deleted": [False, True]}


async def test_put_and_apply_through_the_real_server(
    api: AsyncClient, recording_target: RecordingTarget
) -> None:
    def spec(**fields: Any) -> dict[str, Any]:
        trigger = {"kind": "interval", "every": 3600}
        return {"trigger": trigger, "target": {"url": recording_target.url()}, **fields}

    created = await api.put("/tasks/file-a", json=spec(tags=["files"]))
    assert created.status_code == 201, created.text
    assert (await api.put("/tasks/file-a", json=spec(tags=["files"]))).json()["version"] == 1
    assert (await api.put("/tasks/file-b", json=spec(tags=["files"]))).status_code == 201
    body = {
        "tasks": [
            {"name": "file-a", **spec(tags=["files"], description="changed")},
            {"name": "file-c", **spec(tags=["files"])},
        ],
        "prune": True,
        "selector": {"tag": "files"},
    }
    dry = await api.post("/tasks/apply", json={**body, "dry_run": True})
    expected = {
        "created": ["file-c"],
        "updated": ["file-a"],
        "unchanged": [],
        "deleted": ["file-b"],
        "changes": {"file-a": {"description": [None, "changed"]}},
    }
    assert dry.json() == expected
    assert (await api.get("/tasks/file-b")).status_code == 200
    applied = await api.post("/tasks/apply", json=body)
    assert applied.status_code == 200, applied.text
    assert applied.json() == expected
    listed = (await api.get("/tasks", params={"tag": "files"})).json()["items"]
    assert sorted(task["name"] for task in listed) == ["file-a", "file-c"]
    bad = {"tasks": [{"name": "file-d", **spec(max_running_instances=0)}]}
    problem = await api.post("/tasks/apply", json=bad)
    assert problem.status_code == 422
    assert problem.json()["errors"][0]["field"] == "tasks[0].max_running_instances"
    assert (await api.get("/tasks/file-d")).status_code == 404
