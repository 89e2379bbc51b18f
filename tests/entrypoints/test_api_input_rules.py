"""Inputs that once slipped through or broke an answer (an outside audit, 2026-12-03):
each is now a 422 naming the field, with nothing written, on both stores; and a
trigger's own instants are answered as every instant is, in UTC and whole seconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest
from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import cron_task, fields_of

Client = AsyncTestClient[Any]


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        pytest.param(
            {"target": {"url": "http://alice:pw-in-url@127.0.0.1:9/"}},
            "target.url",
            "credentials",
            id="credentials-in-the-url",
        ),
        pytest.param(
            {"target": {"url": "http://127.0.0.1:9/", "headers": {"User-Agent": "mine"}}},
            "target.headers",
            "set by the scheduler",
            id="user-agent",
        ),
        pytest.param(
            {"target": {"url": "http://127.0.0.1:9/", "headers": {"X-A": "1", "x-a": "2"}}},
            "target.headers",
            "named twice",
            id="a-header-twice",
        ),
        pytest.param(
            {"target": {"url": "http://127.0.0.1:9/", "headers": {"Authorization": "Bearer x"}}},
            "target.headers",
            "'Authorization' carries a credential, which a task never stores: name the "
            'environment variable that holds it in headers_env ({"Authorization": "VARIABLE"})'
            " or use auth",
            id="a-literal-authorization-header",
        ),
        pytest.param(
            {
                "target": {
                    "url": "http://127.0.0.1:9/",
                    "headers": {"proxy-authorization": "Basic eDp5"},
                    "auth": {"type": "bearer", "token_env": "SOME_TOKEN"},
                }
            },
            "target.headers",
            "'proxy-authorization' carries a credential",
            id="a-literal-proxy-authorization-header",
        ),
        pytest.param({"tags": ["nightly", "nightly"]}, "tags", "must not repeat", id="a-tag-twice"),
        pytest.param({"name": str(uuid4())}, "name", "read as an id", id="a-uuid-name"),
        pytest.param({"name": uuid4().hex}, "name", "read as an id", id="a-uuid-name-bare"),
    ],
)
async def test_a_task_that_would_not_do_what_it_says_is_refused(
    api: Client, change: dict[str, Any], field: str, words: str
) -> None:
    body = cron_task("http://127.0.0.1:9/") | change

    created = await api.post("/tasks", json=body)
    put = await api.put(f"/tasks/{body['name']}", json=body)

    for answer in (created, put):
        assert fields_of(answer) == [field]
        assert words in answer.json()["errors"][0]["message"]
        assert "pw-in-url" not in answer.text
    assert (await api.get("/tasks")).json()["items"] == []


async def test_a_name_that_reads_as_an_id_cannot_be_given_by_a_rename(api: Client) -> None:
    created = (await api.post("/tasks", json=cron_task("http://127.0.0.1:9/"))).json()

    renamed = await api.patch(f"/tasks/{created['id']}", json={"name": created["id"]})

    assert fields_of(renamed) == ["name"]
    assert (await api.get(f"/tasks/{created['id']}")).json()["name"] == "nightly-report"


@pytest.mark.parametrize("name", [".", "..", "..."])
async def test_a_name_of_dots_alone_is_refused_wherever_a_name_is_given(
    api: Client, name: str
) -> None:
    # "/tasks/.." is resolved away by browsers and clients: no path would reach it.
    body = cron_task("http://127.0.0.1:9/", name=name)
    escaped = "%2E" * len(name)  # as a path segment that is not resolved away
    existing = (await api.post("/tasks", json=cron_task("http://127.0.0.1:9/"))).json()
    answers = [
        await api.post("/tasks", json=body),
        await api.put(f"/tasks/{escaped}", json=body),
        await api.post("/tasks/apply", json={"tasks": [body]}),
        await api.patch(f"/tasks/{existing['id']}", json={"name": name}),
        await api.post("/calendars", json={"name": name, "dates": ["2030-12-24"]}),
        await api.put(f"/calendars/{escaped}", json={"name": name, "dates": ["2030-12-24"]}),
    ]

    for answer in answers:
        assert fields_of(answer) in (["name"], ["tasks[0].name"]), answer.text
        assert "dots alone" in answer.json()["errors"][0]["message"]
    assert [t["name"] for t in (await api.get("/tasks")).json()["items"]] == ["nightly-report"]
    assert (await api.get("/calendars")).json()["items"] == []
    dotted = cron_task("http://127.0.0.1:9/", name=f"{name}a")  # dots among others are fine
    assert (await api.post("/tasks", json=dotted)).status_code == 201


async def test_trigger_instants_are_answered_in_utc_whole_seconds(api: Client) -> None:
    trigger = {
        "kind": "cron",
        "expression": "0 9 * * *",
        "timezone": "Asia/Kolkata",
        "start_at": "2099-01-01T00:00:00+05:30",
        "end_at": "2100-01-01T00:00:00.999+05:30",
    }
    one_shot = {"kind": "one_shot", "run_at": "2099-06-01T12:00:00.5+02:00"}
    # A naive wall time is the trigger's timezone's reading: it stays as written.
    interval = {"kind": "interval", "every": 60, "anchor": "2099-01-01T08:00:00"}

    answers = [
        (await api.post("/tasks", json=cron_task("http://127.0.0.1:9/", name=name, trigger=t)))
        for name, t in (("bounded", trigger), ("once", one_shot), ("naive", interval))
    ]

    assert [answer.status_code for answer in answers] == [201, 201, 201]
    bounded, once, naive = (answer.json()["trigger"] for answer in answers)
    assert (bounded["start_at"], bounded["end_at"]) == (
        "2098-12-31T18:30:00Z",
        "2099-12-31T18:30:00Z",
    )
    assert once["run_at"] == "2099-06-01T10:00:00Z"
    assert naive["anchor"] == "2099-01-01T08:00:00"
    # The same instants, so the same fire times as written.
    upcoming = (await api.get("/tasks/bounded/upcoming", params={"count": 1})).json()
    assert upcoming["fire_times"] == ["2099-01-01T03:30:00Z"]


async def test_an_instant_without_an_offset_or_out_of_range_is_a_422(api: Client) -> None:
    await api.post("/tasks", json=cron_task("http://127.0.0.1:9/"))
    yesterday = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")

    naive = await api.get("/tasks/nightly-report/explain", params={"at": "2026-12-03T00:00:00"})
    ancient = await api.post(
        "/tasks/nightly-report/backfill",
        json={"start": "0001-01-01T00:00:00Z", "end": yesterday, "dry_run": True},
    )

    assert fields_of(naive) == ["at"]
    assert fields_of(ancient) == ["start"]
    assert (await api.get("/runs")).json()["items"] == []


async def test_a_calendar_is_a_set_and_its_name_never_reads_as_an_id(api: Client) -> None:
    body = {
        "name": "closed",
        "dates": ["2026-12-31", "2026-12-31"],
        "yearly": ["01-01", "01-01"],
        "weekdays": ["sat", "SAT"],
    }

    created = await api.post("/calendars", json=body)
    named_as_id = await api.post("/calendars", json={"name": str(uuid4())})

    assert created.status_code == 201, created.text
    calendar = created.json()
    assert (calendar["dates"], calendar["yearly"], calendar["weekdays"]) == (
        ["2026-12-31"],
        ["01-01"],
        ["SAT"],
    )
    assert fields_of(named_as_id) == ["name"]
    assert [c["name"] for c in (await api.get("/calendars")).json()["items"]] == ["closed"]


async def test_a_calendar_put_that_changes_nothing_keeps_its_version(api: Client) -> None:
    body = {"name": "closed", "dates": ["2026-12-31"], "weekdays": ["SAT"]}

    first = await api.put("/calendars/closed", json=body)
    again = await api.put("/calendars/closed", json=body)
    changed = await api.put("/calendars/closed", json=body | {"weekdays": ["SUN"]})

    assert (first.status_code, again.status_code, changed.status_code) == (201, 200, 200)
    assert [r.json()["version"] for r in (first, again, changed)] == [1, 1, 2]
    assert again.headers["ETag"] == '"1"'


@pytest.mark.parametrize(
    ("unit", "most"), [("years", 100), ("months", 1_200), ("weeks", 5_218), ("days", 36_525)]
)
async def test_a_calendar_step_is_at_most_a_hundred_years(
    api: Client, unit: str, most: int
) -> None:
    # A larger step never came back: the task stood enabled with no next run, forever.
    trigger = {"kind": "calendar", "start_date": "2026-01-01"}
    body = cron_task("http://127.0.0.1:9/") | {"trigger": trigger | {unit: most + 1}}

    refused = await api.post("/tasks", json=body)

    assert fields_of(refused) == [f"trigger.{unit}"]
    assert (await api.get("/tasks")).json()["items"] == []
    body["trigger"][unit] = most
    created = await api.post("/tasks", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["next_run_at"] is not None


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ("/runs?status=bogus", "status", "must be one of running, succeeded, failed, missed, "),
        ("/events?status=bogus", "status", "must be one of pending, sent, dropped"),
        ("/tasks?limit=0", "limit", "must be an integer of at least 1"),
        ("/runs?limit=501", "limit", "must be an integer of at most 500"),
        ("/tasks?limit=many", "limit", "must be an integer"),
        ("/tasks?limit=1.0", "limit", "must be an integer written in digits (50), not '1.0'"),
        ("/tasks/x/upcoming?count=1e1", "count", "must be an integer written in digits"),
    ],
)
async def test_a_bad_query_value_is_named_in_the_api_s_own_words(
    api: Client, query: str, field: str, message: str
) -> None:
    answer = await api.get(query)

    assert fields_of(answer) == [field]
    assert answer.json()["errors"][0]["message"].startswith(message)


async def test_an_empty_icalendar_and_an_instant_without_offset_say_what_to_send(
    api: Client,
) -> None:
    await api.post("/calendars", json={"name": "closures"})
    for empty in (b"", b"  \r\n"):
        answer = await api.post(
            "/calendars/closures/import", content=empty, headers={"Content-Type": "text/calendar"}
        )
        assert fields_of(answer) == ["body"]
        assert answer.json()["errors"][0]["message"].startswith("is empty: send iCalendar")
    created = await api.post("/tasks", json=cron_task("http://127.0.0.1:9/"))
    backfill = await api.post(
        f"/tasks/{created.json()['id']}/backfill",
        json={"start": "2026-01-01T00:00:00", "end": "2026-01-02T00:00:00Z"},
    )
    assert fields_of(backfill) == ["start"]
    assert "with an offset" in backfill.json()["errors"][0]["message"]
