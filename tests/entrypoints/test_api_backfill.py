"""`POST /tasks/{id}/backfill` and `POST /backfills/{id}/cancel` through the API, with the
engine running and a real target (docs/policies.md, "Backfill")."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import assert_problem, cron_task, fields
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually

Client = AsyncTestClient[Any]

DAY = timedelta(days=1)


def daily_occurrences(days: int) -> list[datetime]:
    """The last `days` 07:30 UTC occurrences before now, oldest first; the latest at
    least two minutes past, so that a range ending a minute after it is not in the
    future (the API refuses that)."""
    now = datetime.now(UTC)
    latest = now.replace(hour=7, minute=30, second=0, microsecond=0)
    if latest > now - timedelta(minutes=2):
        latest -= DAY
    return [latest - k * DAY for k in reversed(range(days))]


def utc_daily(target_url: str, **fields: Any) -> dict[str, Any]:
    trigger = {"kind": "cron", "expression": "30 7 * * *", "timezone": "UTC"}
    return cron_task(target_url, trigger=trigger, **fields)


def span(occurrences: list[datetime]) -> dict[str, str]:
    return {
        "start": (occurrences[0] - timedelta(minutes=1)).isoformat(),
        "end": (occurrences[-1] + timedelta(minutes=1)).isoformat(),
    }


async def backfill_runs(client: Client, backfill_id: str) -> list[dict[str, Any]]:
    return list((await client.get(f"/runs?backfill={backfill_id}")).json()["items"])


async def test_each_backfilled_run_is_called_with_its_occurrences_idempotency_key(
    client: Client, recording_target: RecordingTarget
) -> None:
    task = (
        await client.post("/tasks", json=utc_daily(recording_target.url(), overlap="buffer_all"))
    ).json()
    past = daily_occurrences(3)
    response = await client.post(f"/tasks/{task['id']}/backfill", json=span(past))
    assert response.status_code == 202, response.text
    answer = response.json()
    assert answer["runs"] == 3
    assert [datetime.fromisoformat(at) for at in answer["occurrences"]] == past
    # One slot: the oldest starts at once, the others wait their turn.
    assert [run["status"] for run in answer["items"]] == ["running", "queued", "queued"]

    calls = await eventually(lambda: _received(recording_target, 3), "three calls at the target")
    keys = [call.header("Idempotency-Key") for call in calls]
    assert keys == [f"{task['id']}:{int(at.timestamp())}" for at in past]
    scheduled = [call.header("X-Scheduler-Scheduled-For") for call in calls]
    assert [datetime.fromisoformat(str(s)) for s in scheduled] == past

    async def all_succeeded() -> list[dict[str, Any]] | None:
        runs = await backfill_runs(client, answer["backfill_id"])
        return runs if {r["status"] for r in runs} == {"succeeded"} else None

    runs = await eventually(all_succeeded, "the backfill's runs succeeded")
    assert len(runs) == 3 and {r["backfill_id"] for r in runs} == {answer["backfill_id"]}

    # Backfilled again, with only_missing (the default): nothing is missing any more.
    again = await client.post(f"/tasks/{task['id']}/backfill", json=span(past))
    assert (again.status_code, again.json()["runs"]) == (202, 0)
    everything = await client.post(
        f"/tasks/{task['id']}/backfill", json=span(past) | {"only_missing": False, "dry_run": True}
    )
    assert (everything.status_code, everything.json()["runs"]) == (200, 3)


async def _received(target: RecordingTarget, count: int) -> list[Any] | None:
    calls = target.received()
    return calls if len(calls) >= count else None


async def test_allow_all_runs_every_one_at_once_on_a_skip_task(
    client: Client, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", *[Response(delay=0.5)] * 2)
    await client.post("/tasks", json=utc_daily(recording_target.url()))
    past = daily_occurrences(2)
    body = span(past) | {"overlap": "allow_all"}
    answer = (await client.post("/tasks/nightly-report/backfill", json=body)).json()
    assert [run["status"] for run in answer["items"]] == ["running", "running"]
    await eventually(lambda: _received(recording_target, 2), "both calls")


async def test_dry_run_answers_200_and_writes_nothing(
    client: Client, recording_target: RecordingTarget
) -> None:
    await client.post("/tasks", json=utc_daily(recording_target.url(), overlap="buffer_all"))
    past = daily_occurrences(2)
    response = await client.post(
        "/tasks/nightly-report/backfill", json=span(past) | {"dry_run": True}
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["runs"] == 2
    assert await backfill_runs(client, answer["backfill_id"]) == []
    assert (await client.get("/runs")).json()["items"] == []
    assert_problem(await client.post(f"/backfills/{answer['backfill_id']}/cancel"), 404)


def _bad(now: datetime) -> list[tuple[dict[str, Any], str]]:
    week_ago = now - 7 * DAY
    return [
        ({"start": now.isoformat(), "end": week_ago.isoformat()}, "end"),  # reversed
        ({"start": week_ago.isoformat(), "end": (now + DAY).isoformat()}, "end"),  # future
        # Older than the run retention (30 days): the sweep would delete what it made.
        ({"start": (now - 31 * DAY).isoformat(), "end": now.isoformat()}, "start"),
        ({"start": week_ago.isoformat(), "end": now.isoformat(), "overlap": "skip"}, "overlap"),
        ({"start": "2026-01-01T00:00:00", "end": now.isoformat()}, "start"),  # no offset
        ({"end": now.isoformat()}, "start"),
        ({"start": week_ago.isoformat(), "end": now.isoformat(), "every": 1}, "every"),
    ]


async def test_more_than_a_thousand_fire_times_is_a_422_on_end(
    client: Client, recording_target: RecordingTarget
) -> None:
    every_minute = {"kind": "cron", "expression": "* * * * *", "timezone": "UTC"}
    await client.post("/tasks", json=cron_task(recording_target.url(), trigger=every_minute))
    now = datetime.now(UTC)
    body = {"start": (now - 2 * DAY).isoformat(), "end": now.isoformat()}  # 2,880 of them
    problem = assert_problem(await client.post("/tasks/nightly-report/backfill", json=body), 422)
    assert fields(problem) == ["end"]
    assert "more than 1,000 fire times" in problem["errors"][0]["message"]


@pytest.mark.parametrize("case", range(7))
async def test_bad_input_is_a_422_naming_the_field_and_nothing_is_written(
    client: Client, recording_target: RecordingTarget, case: int
) -> None:
    await client.post("/tasks", json=utc_daily(recording_target.url(), overlap="buffer_all"))
    body, field = _bad(datetime.now(UTC))[case]
    response = await client.post("/tasks/nightly-report/backfill", json=body)
    assert fields(assert_problem(response, 422)) == [field]
    assert (await client.get("/runs")).json()["items"] == []


async def test_a_default_task_queues_its_backfill_one_call_after_the_other(
    api: Client, recording_target: RecordingTarget
) -> None:
    """`buffer_all` (the backfill's default) on a task of the default `overlap: "skip"`:
    the runs wait in order, each called once its predecessor ended."""
    recording_target.respond("/", *[Response(delay=0.3)] * 3)
    task = (await api.post("/tasks", json=utc_daily(recording_target.url()))).json()
    assert task["overlap"] == "skip"
    past = daily_occurrences(3)
    response = await api.post("/tasks/nightly-report/backfill", json=span(past))
    assert response.status_code == 202, response.text
    answer = response.json()
    assert [run["status"] for run in answer["items"]] == ["running", "queued", "queued"]

    async def all_succeeded() -> list[dict[str, Any]] | None:
        runs = await backfill_runs(api, answer["backfill_id"])
        return runs if [r["status"] for r in runs] == ["succeeded"] * 3 else None

    runs = await eventually(all_succeeded, "the backfill's runs succeeded")
    calls = recording_target.received()
    keys = [call.header("Idempotency-Key") for call in calls]
    assert keys == [f"{task['id']}:{int(at.timestamp())}" for at in past]
    runs.sort(key=lambda run: run["scheduled_for"])
    for before, after in itertools.pairwise(runs):
        assert after["started_at"] >= before["finished_at"]


async def test_a_paused_task_needs_allow_all(
    client: Client, recording_target: RecordingTarget
) -> None:
    await client.post("/tasks", json=utc_daily(recording_target.url(), enabled=False))
    response = await client.post("/tasks/nightly-report/backfill", json=span(daily_occurrences(2)))
    assert fields(assert_problem(response, 422)) == ["overlap"]
    assert (await client.get("/runs")).json()["items"] == []
    body = span(daily_occurrences(2)) | {"overlap": "allow_all", "dry_run": True}
    assert (await client.post("/tasks/nightly-report/backfill", json=body)).status_code == 200


async def test_cancel_a_backfill(client: Client, recording_target: RecordingTarget) -> None:
    recording_target.respond("/", Response(delay=30))  # the first call hangs
    await client.post("/tasks", json=utc_daily(recording_target.url(), overlap="buffer_all"))
    answer = (
        await client.post("/tasks/nightly-report/backfill", json=span(daily_occurrences(3)))
    ).json()
    await eventually(lambda: _received(recording_target, 1), "the first call")
    response = await client.post(f"/backfills/{answer['backfill_id']}/cancel")
    assert (response.status_code, response.json()) == (202, {"cancelled": 3})

    async def ended() -> list[str] | None:
        runs = await backfill_runs(client, answer["backfill_id"])
        statuses = sorted(r["status"] for r in runs)
        return statuses if statuses == ["cancelled"] * 3 else None

    await eventually(ended, "every run of the backfill cancelled")
    assert len(recording_target.received()) == 1  # the queued ones were never called
    assert_problem(await client.post("/backfills/not-an-id/cancel"), 404)
    assert_problem(await client.post("/tasks/nope/backfill", json=span(daily_occurrences(1))), 404)


async def test_a_calendar_the_trigger_names_is_followed(
    client: Client, recording_target: RecordingTarget
) -> None:
    past = daily_occurrences(3)
    holiday = {"name": "holidays", "dates": [past[1].date().isoformat()]}
    assert (await client.post("/calendars", json=holiday)).status_code == 201
    body = utc_daily(recording_target.url(), overlap="buffer_all")
    body["trigger"]["calendar"] = {"name": "holidays", "policy": "exclude"}
    assert (await client.post("/tasks", json=body)).status_code == 201
    answer = (
        await client.post("/tasks/nightly-report/backfill", json=span(past) | {"dry_run": True})
    ).json()
    assert [datetime.fromisoformat(at) for at in answer["occurrences"]] == [past[0], past[2]]


async def test_a_backfill_is_read_while_it_runs_and_once_it_finished(
    api: Client, recording_target: RecordingTarget
) -> None:
    # The first call hangs until released: the backfill is read while it runs.
    recording_target.respond("/", *[Response(delay=60)] * 2)
    await api.post("/tasks", json=utc_daily(recording_target.url()))
    past = daily_occurrences(2)
    answer = (await api.post("/tasks/nightly-report/backfill", json=span(past))).json()
    read = await api.get(f"/backfills/{answer['backfill_id']}")
    assert read.status_code == 200, read.text
    state = read.json()
    assert state["id"] == answer["backfill_id"] and state["task_name"] == "nightly-report"
    assert (state["overlap"], state["only_missing"], state["actor"]) == ("buffer_all", True, None)
    assert datetime.fromisoformat(state["start"]) == past[0] - timedelta(minutes=1)
    assert state["status"] == "active" and state["finished_at"] is None
    assert state["runs"] == {
        "total": 2,
        "finished": 0,
        "pending": 2,
        "by_status": {"queued": 1, "running": 1},
    }
    recording_target.release()

    async def finished() -> dict[str, Any] | None:
        state = (await api.get(f"/backfills/{answer['backfill_id']}")).json()
        return state if state["status"] == "finished" else None

    state = await eventually(finished, "the backfill to finish")
    assert state["runs"] == {
        "total": 2,
        "finished": 2,
        "pending": 0,
        "by_status": {"succeeded": 2},
    }


async def test_a_backfill_that_made_no_runs_is_read_and_cancelled(
    api: Client, recording_target: RecordingTarget
) -> None:
    await api.post("/tasks", json=utc_daily(recording_target.url()))
    # A range without a fire time in it: the backfill makes no runs.
    latest = daily_occurrences(1)[0]
    body = {
        "start": (latest - timedelta(minutes=2)).isoformat(),
        "end": (latest - timedelta(minutes=1)).isoformat(),
    }
    answer = (await api.post("/tasks/nightly-report/backfill", json=body)).json()
    assert answer["runs"] == 0
    state = (await api.get(f"/backfills/{answer['backfill_id']}")).json()
    assert (state["status"], state["runs"]["total"]) == ("finished", 0)
    response = await api.post(f"/backfills/{answer['backfill_id']}/cancel")
    assert (response.status_code, response.json()) == (202, {"cancelled": 0})


@pytest.mark.parametrize("ref", ["not-an-id", "00000000-0000-4000-8000-000000000007"])
async def test_an_unknown_backfill_is_a_404_problem(client: Client, ref: str) -> None:
    assert_problem(await client.get(f"/backfills/{ref}"), 404)
    assert_problem(await client.post(f"/backfills/{ref}/cancel"), 404)


async def test_a_finished_backfill_sends_backfill_finished_once(
    api: Client, recording_target: RecordingTarget
) -> None:
    notify = {"url": recording_target.url("/team"), "events": ["backfill.finished"]}
    body = utc_daily(recording_target.url("/job"), notify=notify)
    assert (await api.post("/tasks", json=body)).status_code == 201
    answer = (
        await api.post("/tasks/nightly-report/backfill", json=span(daily_occurrences(2)))
    ).json()

    async def told() -> list[Any] | None:
        calls = recording_target.received("/team")
        return calls if calls else None

    (call,) = await eventually(told, "the backfill.finished event at the team's hook")
    event = call.json()
    assert event["type"] == "backfill.finished"
    assert event["data"]["backfill"] == {
        "id": answer["backfill_id"],
        "status": "finished",
        "runs": 2,
        "by_status": {"succeeded": 2},
    }
    listed = (await api.get("/events")).json()["items"]
    assert [e["type"] for e in listed] == ["backfill.finished"]


@pytest.mark.parametrize("ending", ["pause", "delete"])
async def test_a_pause_or_delete_that_cancels_a_backfill_s_queue_sends_it(
    api: Client, recording_target: RecordingTarget, ending: str
) -> None:
    """The task's own run holds its only slot, so the backfill's runs all wait; pausing
    the task (a merge patch) or deleting it cancels them, and with them the backfill
    ends: `backfill.finished` goes to the task's `notify`, which names no `events` (all
    of them)."""
    recording_target.respond("/job", Response(delay=30))
    body = utc_daily(recording_target.url("/job"), notify={"url": recording_target.url("/team")})
    assert (await api.post("/tasks", json=body)).status_code == 201
    assert (await api.post("/tasks/nightly-report/runs")).json()["status"] == "running"
    answer = (
        await api.post("/tasks/nightly-report/backfill", json=span(daily_occurrences(2)))
    ).json()
    assert [run["status"] for run in answer["items"]] == ["queued", "queued"]
    if ending == "pause":
        response = await api.patch("/tasks/nightly-report", json={"enabled": False})
        assert response.status_code == 200, response.text
    else:
        assert (await api.delete("/tasks/nightly-report")).status_code == 204

    async def told() -> list[Any] | None:
        calls = recording_target.received("/team")
        return calls if calls else None

    (call,) = await eventually(told, "the backfill.finished event at the team's hook")
    event = call.json()
    assert (event["type"], event["data"]["task"]["name"]) == ("backfill.finished", "nightly-report")
    assert event["data"]["backfill"] == {
        "id": answer["backfill_id"],
        "status": "finished",
        "runs": 2,
        "by_status": {"cancelled": 2},
    }
    state = (await api.get(f"/backfills/{answer['backfill_id']}")).json()
    assert (state["status"], state["runs"]["pending"]) == ("finished", 0)
