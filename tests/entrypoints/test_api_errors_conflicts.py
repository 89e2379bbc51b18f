"""Error table rows 409 and 412 (docs/api.md "Errors"), nothing changed; a fire now at capacity."""

from __future__ import annotations

import pytest

from tests.entrypoints.helpers import Client, assert_problem, cron_task, task_count
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually


async def test_a_duplicate_name_is_a_409(client: Client, recording_target: RecordingTarget) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))

    response = await client.post("/tasks", json=cron_task(recording_target.url()))

    assert "nightly-report" in assert_problem(response, 409)["detail"]
    assert await task_count(client) == 1


async def test_a_rename_onto_an_existing_name_is_a_409(
    client: Client, recording_target: RecordingTarget
) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))
    await client.post("/tasks", json=cron_task(recording_target.url(), "other"))

    response = await client.patch("/tasks/other", json={"name": "nightly-report"})

    assert_problem(response, 409)


@pytest.mark.parametrize("if_match", ['"1"', "1", 'W/"1"', '"abc"', '"1", "2"'])
async def test_a_stale_if_match_is_a_412_and_changes_nothing(
    client: Client, recording_target: RecordingTarget, if_match: str
) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))
    await client.patch("/tasks/nightly-report", json={"description": "v2"})

    response = await client.patch(
        "/tasks/nightly-report", json={"description": "v3"}, headers={"If-Match": if_match}
    )

    assert_problem(response, 412)
    task = (await client.get("/tasks/nightly-report")).json()
    assert task["version"] == 2 and task["description"] == "v2"


async def test_cancel_of_a_finished_run_is_a_409(
    client: Client, recording_target: RecordingTarget
) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))
    run = (await client.post("/tasks/nightly-report/runs")).json()

    async def finished() -> bool:
        return bool((await client.get(f"/runs/{run['id']}")).json()["status"] != "running")

    await eventually(finished)

    response = await client.post(f"/runs/{run['id']}/cancel")

    assert "succeeded" in assert_problem(response, 409)["detail"]


async def test_fire_now_at_max_running_instances_records_and_counts_a_skipped_run(
    client: Client, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/hang", Response(delay=30))
    await client.post("/tasks", json=cron_task(recording_target.url("/hang")))
    await client.post("/tasks/nightly-report/runs")

    # A run in flight holds the only slot: a second fire now is recorded, not called.
    response = await client.post("/tasks/nightly-report/runs")

    assert response.status_code == 202
    assert response.json()["status"] == "skipped"
    metrics = (await client.get("/metrics")).text
    assert 'scheduler_runs_total{status="skipped"} 1.0' in metrics
