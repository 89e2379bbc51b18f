"""The real server over real HTTP, on both stores: runs across tasks, task history,
declarative sync."""

from __future__ import annotations

from typing import Any

from httpx import AsyncClient

from tests.entrypoints.helpers import cron_task, eventually
from tests.entrypoints.test_end_to_end import api, create, server, store_environ
from tests.fixtures.target import RecordingTarget

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
