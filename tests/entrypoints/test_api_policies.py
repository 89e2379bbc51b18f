"""Occurrence policy fields through the API: validated, stored, returned, patchable."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import assert_problem, cron_task, fields, task_count
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually

Client = AsyncTestClient[Any]


async def test_policies_are_returned_and_patchable(
    client: Client, recording_target: RecordingTarget
) -> None:
    body = {**cron_task(recording_target.url()), "catch_up": "all", "max_catch_up": 24}
    created = (await client.post("/tasks", json=body)).json()
    assert (created["catch_up"], created["max_catch_up"], created["overlap"]) == (
        "all",
        24,
        "skip",
    )
    response = await client.patch("/tasks/nightly-report", json={"catch_up": "latest"})
    assert response.status_code == 200, response.text
    read = (await client.get("/tasks/nightly-report")).json()
    assert (read["catch_up"], read["max_catch_up"], read["version"]) == ("latest", 24, 2)


@pytest.mark.parametrize(
    ("field", "value"),
    [("catch_up", "every"), ("max_catch_up", 0), ("max_catch_up", 10_001), ("overlap", "wait")],
)
async def test_a_bad_policy_is_a_422_naming_it_and_nothing_is_written(
    client: Client, recording_target: RecordingTarget, field: str, value: object
) -> None:
    body = {**cron_task(recording_target.url()), field: value}
    assert fields(assert_problem(await client.post("/tasks", json=body), 422)) == [field]
    assert await task_count(client) == 0
    await client.post("/tasks", json=cron_task(recording_target.url()))
    patch = await client.patch("/tasks/nightly-report", json={field: value})
    assert fields(assert_problem(patch, 422)) == [field]
    assert (await client.get("/tasks/nightly-report")).json()["version"] == 1


async def test_explain_answers_the_contract_shape(
    client: Client, recording_target: RecordingTarget
) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))
    response = await client.get("/tasks/nightly-report/explain")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert set(answer) == {"occurrence", "verdict", "detail", "runs", "task_version"}
    # Created just now: the trigger's occurrence before now came before the task.
    assert answer["verdict"] == "not_scheduled" and answer["detail"].startswith("not scheduled: ")


async def test_explain_of_an_unknown_task_or_a_bad_instant_is_a_problem(
    client: Client, recording_target: RecordingTarget
) -> None:
    assert_problem(await client.get("/tasks/nobody/explain"), 404)
    await client.post("/tasks", json=cron_task(recording_target.url()))
    problem = assert_problem(await client.get("/tasks/nightly-report/explain?at=yesterday"), 422)
    assert fields(problem) == ["at"]
    # Instants a scheduler has nothing to say about, or whose UTC reading overflows
    # (found by Schemathesis: a 500 before).
    for at in ("0001-01-01T00:00:00%2B13:12", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"):
        problem = assert_problem(await client.get(f"/tasks/nightly-report/explain?at={at}"), 422)
        assert fields(problem) == ["at"], at


async def test_a_queued_run_is_listed_by_status_and_cancelled_uncalled(
    client: Client, recording_target: RecordingTarget
) -> None:
    # Every second, and each call takes longer than that: the next occurrence waits.
    recording_target.respond("/slow", Response(delay=30))
    body = {
        **cron_task(recording_target.url("/slow"), overlap="buffer_one"),
        "trigger": {"kind": "interval", "every": 1},
        "target": {"url": recording_target.url("/slow"), "timeout_seconds": 60},
    }
    created = await client.post("/tasks", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["overlap"] == "buffer_one"

    async def queued_runs() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = (
            await client.get("/runs", params={"status": "queued"})
        ).json()["items"]
        return items

    [queued] = await eventually(queued_runs, "a queued run", interval=0.05)
    assert (queued["status"], queued["started_at"], queued["lease_expires_at"]) == (
        "queued",
        None,
        None,
    )
    response = await client.post(f"/runs/{queued['id']}/cancel")
    assert response.status_code == 202, response.text
    assert (response.json()["status"], response.json()["error"]) == (
        "cancelled",
        "cancelled through the API",
    )
    # Paused: nothing waits any longer, and the run cancelled was never called.
    await client.patch("/tasks/nightly-report", json={"enabled": False})
    assert (await client.get("/runs", params={"status": "queued"})).json()["items"] == []
    called = {r.header("X-Scheduler-Run-Id") for r in recording_target.received("/slow")}
    assert queued["id"] not in called
