"""Annotated fire times and inline calendars through the app (docs/api.md, "Annotated
fire times"): the flags and omissions a person reads before creating anything."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import cron_task

Client = AsyncTestClient[Any]
WEEKEND = {"name": "weekend", "weekdays": ["SAT", "SUN"]}


async def preview(client: Client, **body: Any) -> Any:
    response = await client.post("/triggers/preview", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def test_annotated_preview_shows_a_skipped_gap_and_the_fold(client: Client) -> None:
    trigger = {
        "kind": "cron",
        "expression": "30 2 * * *",
        "timezone": "America/New_York",
        "dst": {"gap": "skip"},
    }
    answer = await preview(
        client, trigger=trigger, count=2, after="2026-03-07T12:00:00Z", annotate=True
    )
    assert answer == {
        "fire_times": ["2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"],
        "occurrences": [
            {
                "at": "2026-03-09T06:30:00Z",
                "local": "2026-03-09T02:30:00-04:00",
                "wall": "02:30:00",
                "flags": [],
            },
            {
                "at": "2026-03-10T06:30:00Z",
                "local": "2026-03-10T02:30:00-04:00",
                "wall": "02:30:00",
                "flags": [],
            },
        ],
        "omitted": [
            {"date": "2026-03-08", "wall": "02:30:00", "reason": "dst_gap", "calendar": None}
        ],
    }
    both = {**trigger, "expression": "30 1 * * *", "dst": {"fold": "both"}}
    answer = await preview(
        client, trigger=both, count=2, after="2026-11-01T00:00:00Z", annotate=True
    )
    assert [(o["at"], o["flags"]) for o in answer["occurrences"]] == [
        ("2026-11-01T05:30:00Z", ["fold_first"]),
        ("2026-11-01T06:30:00Z", ["fold_second"]),
    ]


async def test_preview_rolls_around_an_inline_calendar(client: Client) -> None:
    trigger = {
        "kind": "cron",
        "expression": "0 9 1 * *",
        "calendar": {"name": "weekend", "policy": "previous_business_day"},
    }
    answer = await preview(
        client,
        trigger=trigger,
        count=1,
        after="2026-02-15T00:00:00Z",
        annotate=True,
        calendars=[WEEKEND],
    )
    assert answer["occurrences"] == [
        {
            "at": "2026-02-27T09:00:00Z",
            "local": "2026-02-27T09:00:00+00:00",
            "wall": "09:00:00",
            "flags": ["rolled"],
            "rolled_from": "2026-03-01",
        }
    ]
    plain = await preview(
        client, trigger=trigger, count=1, after="2026-02-15T00:00:00Z", calendars=[WEEKEND]
    )
    assert plain == {"fire_times": ["2026-02-27T09:00:00Z"]}


async def test_a_roll_onto_a_fire_time_the_schedule_has_is_told_as_merged(
    client: Client,
) -> None:
    # Daily at 09:00 rolled forward around a weekend (2026-03-07 is a Saturday): Sunday
    # lands on Monday's own 09:00, which fires once. The preview tells Sunday's wall time.
    trigger = {
        "kind": "cron",
        "expression": "0 9 * * *",
        "calendar": {"name": "weekend", "policy": "next_business_day"},
    }
    answer = await preview(
        client,
        trigger=trigger,
        count=2,
        after="2026-03-06T10:00:00Z",
        annotate=True,
        calendars=[WEEKEND],
    )
    assert answer["fire_times"] == ["2026-03-09T09:00:00Z", "2026-03-10T09:00:00Z"]
    assert [(o["date"], o["reason"], o["calendar"]) for o in answer["omitted"]] == [
        ("2026-03-07", "rolled_away", "weekend"),
        ("2026-03-08", "merged", "weekend"),
    ]


async def test_bad_policies_calendars_and_day_rules_name_the_field(client: Client) -> None:
    cases = [
        ({"trigger": {"kind": "interval", "every": 60, "dst": {"gap": "skip"}}}, "trigger.dst"),
        (
            {"trigger": {"kind": "cron", "expression": "0 0 * * *", "dst": {"gap": "never"}}},
            "trigger.dst.gap",
        ),
        ({"trigger": {"kind": "cron", "expression": "0 0 * * MON#6"}}, "trigger.expression"),
        ({"trigger": {"kind": "cron", "expression": "0 0 * L *"}}, "trigger.expression"),
        (
            {
                "trigger": {
                    "kind": "cron",
                    "expression": "0 9 * * *",
                    "calendar": {"name": "weekend"},
                }
            },
            "trigger.calendar.name",
        ),
        (
            {
                "trigger": {"kind": "cron", "expression": "0 9 * * *"},
                "calendars": [{"name": "h", "dates": ["2026-02-30"]}],
            },
            "calendars.0.dates.0",
        ),
        (
            {
                "trigger": {
                    "kind": "interval",
                    "every": 60,
                    "calendar": {"name": "weekend", "policy": "next_business_day"},
                }
            },
            "trigger.calendar.policy",
        ),
    ]
    for body, field in cases:
        response = await client.post("/triggers/preview", json=body)
        assert response.status_code == 422, (body, response.text)
        assert field in [e["field"] for e in response.json()["errors"]], (body, response.text)


async def test_a_task_naming_a_calendar_that_does_not_exist_is_rejected(client: Client) -> None:
    body = cron_task("http://127.0.0.1:9/hook")
    body["trigger"]["calendar"] = {"name": "us-holidays", "policy": "exclude"}
    response = await client.post("/tasks", json=body)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "trigger.calendar.name"
    assert (await client.get("/tasks")).json()["items"] == []


async def test_upcoming_annotated_adds_run_at_with_jitter(client: Client) -> None:
    body = cron_task("http://127.0.0.1:9/hook", jitter_seconds=600)
    body["trigger"] = {
        "kind": "cron",
        "expression": "30 2 * * *",
        "timezone": "America/New_York",
        "dst": {"gap": "transition"},
    }
    created = await client.post("/tasks", json=body)
    assert created.status_code == 201, created.text
    task = created.json()
    assert task["trigger"]["dst"] == {"gap": "transition", "fold": "auto"}
    plain = (await client.get(f"/tasks/{task['id']}/upcoming", params={"count": 3})).json()
    assert set(plain) == {"fire_times"}
    answer = (
        await client.get(f"/tasks/{task['id']}/upcoming", params={"count": 3, "annotate": "true"})
    ).json()
    assert answer["fire_times"] == plain["fire_times"]
    assert answer["fire_times"][0] == answer["occurrences"][0]["at"]
    assert task["next_run_at"] == answer["occurrences"][0]["run_at"]
    for occurrence in answer["occurrences"]:
        assert occurrence["wall"] == "02:30:00"
        assert occurrence["run_at"] >= occurrence["at"]


async def test_a_preview_over_a_year_of_held_dates_tells_the_first_thousand_omissions(
    client: Client,
) -> None:
    # Every second, rolled past 400 held dates: 34 million wall times do not fire. The
    # answer lists the first free day's fire times, the first 1,000 omissions, and says
    # that there were more (it used to step every one of them, holding the server).
    held = [f"2027-{month:02}-{day:02}" for month in range(1, 13) for day in range(1, 29)]
    closed = {"name": "closed", "dates": held, "weekdays": ["SAT", "SUN"]}
    trigger = {
        "kind": "cron",
        "expression": "* * * * * *",
        "calendar": {"name": "closed", "policy": "next_business_day"},
    }
    answer = await preview(
        client,
        trigger=trigger,
        count=2,
        after="2027-01-01T00:00:00Z",
        annotate=True,
        calendars=[closed],
    )
    assert answer["fire_times"] == ["2027-01-29T00:00:00Z", "2027-01-29T00:00:01Z"]
    assert len(answer["omitted"]) == 1000 and answer["omitted_truncated"] is True
    assert answer["omitted"][0] == {
        "date": "2027-01-01",
        "wall": "00:00:01",
        "reason": "rolled_away",
        "calendar": "closed",
    }
    # A list told whole says nothing of the kind: from the first free day on, every
    # second fires.
    calm = await preview(
        client,
        trigger=trigger,
        count=2,
        after="2027-01-29T00:00:00Z",
        annotate=True,
        calendars=[closed],
    )
    assert calm["omitted"] == [] and "omitted_truncated" not in calm
