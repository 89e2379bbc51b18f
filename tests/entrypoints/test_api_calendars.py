"""/calendars through the app, on both stores (docs/api.md, "Calendars"): CRUD with
versions and If-Match, the iCalendar import, tasks naming a stored calendar, and a
change re-planning them (their history says so)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import fields_of

Client = AsyncTestClient[Any]
URL = "http://127.0.0.1:9/hook"
ICS = "\r\n".join(
    [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        "PRODID:-//test//EN",
        "BEGIN:VEVENT",
        "UID:closed",
        "DTSTART;VALUE=DATE:20301224",
        "DTEND;VALUE=DATE:20301226",
        "END:VEVENT",
        "BEGIN:VEVENT",
        "UID:new-year",
        "DTSTART;VALUE=DATE:20300101",
        "RRULE:FREQ=YEARLY",
        "END:VEVENT",
        "END:VCALENDAR",
        "",
    ]
)


def daily_task(name: str = "payroll", calendar: str = "closures", **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "trigger": {
            "kind": "cron",
            "expression": "0 9 * * *",
            "calendar": {"name": calendar, "policy": "exclude"},
        },
        "target": {"url": URL},
        **fields,
    }


async def test_calendars_are_created_read_listed_changed_and_deleted(api: Client) -> None:
    body = {"name": "closures", "description": "office", "dates": ["2030-12-25"]}
    created = await api.post("/calendars", json={**body, "weekdays": ["sat", "SUN"]})
    assert created.status_code == 201, created.text
    assert created.headers["etag"] == '"1"'
    assert created.headers["location"] == "/calendars/closures"
    calendar = created.json()
    assert calendar["weekdays"] == ["SAT", "SUN"] and calendar["version"] == 1
    assert calendar["created_at"].endswith("Z")
    assert (await api.post("/calendars", json=body)).status_code == 409
    assert (await api.get("/calendars/closures")).json() == calendar
    assert (await api.get(f"/calendars/{calendar['id']}")).json() == calendar
    assert (await api.get("/calendars/nope")).status_code == 404
    await api.post("/calendars", json={"name": "a-first"})
    page = (await api.get("/calendars", params={"limit": 1})).json()
    assert [c["name"] for c in page["items"]] == ["a-first"]
    rest = (await api.get("/calendars", params={"cursor": page["next_cursor"]})).json()
    assert [c["name"] for c in rest["items"]] == ["closures"] and rest["next_cursor"] is None

    stale = await api.patch(
        "/calendars/closures", json={"yearly": ["01-01"]}, headers={"If-Match": '"7"'}
    )
    assert stale.status_code == 412
    patched = await api.patch(
        "/calendars/closures", json={"yearly": ["01-01"]}, headers={"If-Match": '"1"'}
    )
    assert patched.status_code == 200, patched.text
    assert patched.headers["etag"] == '"2"'
    assert patched.json()["yearly"] == ["01-01"] and patched.json()["dates"] == ["2030-12-25"]
    put = await api.put("/calendars/closures", json={"weekdays": ["SUN"]})
    assert (put.status_code, put.json()["version"], put.json()["dates"]) == (200, 3, [])
    missing = await api.put("/calendars/new-one", json={}, headers={"If-Match": '"1"'})
    assert missing.status_code == 412
    assert missing.json()["detail"] == (
        "no calendar named 'new-one' exists (If-Match); read the calendar again and retry"
    )
    made = await api.put("/calendars/new-one", json={"dates": ["2031-01-02"]})
    assert (made.status_code, made.json()["version"]) == (201, 1)
    assert (await api.delete("/calendars/new-one", headers={"If-Match": '"9"'})).status_code == 412
    assert (await api.delete("/calendars/new-one")).status_code == 204
    assert (await api.get("/calendars/new-one")).status_code == 404


async def test_bad_calendars_are_422_naming_the_field_and_nothing_is_written(
    api: Client,
) -> None:
    assert fields_of(await api.post("/calendars", json={"name": "x", "dates": ["2030-02-30"]})) == [
        "dates.0"
    ]
    assert "yearly.0" in fields_of(
        await api.post("/calendars", json={"name": "x", "yearly": ["13-01"]})
    )
    assert "weekdays.0" in fields_of(
        await api.post("/calendars", json={"name": "x", "weekdays": ["FUN"]})
    )
    assert "name" in fields_of(await api.post("/calendars", json={"name": "no spaces"}))
    assert "bogus" in fields_of(await api.post("/calendars", json={"name": "x", "bogus": 1}))
    many = [(date(2030, 1, 1) + timedelta(days=i)).isoformat() for i in range(10_001)]
    assert fields_of(await api.post("/calendars", json={"name": "x", "dates": many})) == ["dates"]
    assert (await api.get("/calendars")).json()["items"] == []
    await api.post("/calendars", json={"name": "x"})
    assert fields_of(await api.patch("/calendars/x", json={"dates": ["soon"]})) == ["dates.0"]
    assert fields_of(await api.patch("/calendars/x", json={"name": "y"})) == ["name"]
    assert fields_of(await api.patch("/calendars/x", json={"bogus": None})) == ["bogus"]
    assert fields_of(await api.patch("/calendars/x", json={"version": None})) == ["version"]
    assert fields_of(await api.put("/calendars/x", json={"name": "y"})) == ["name"]
    assert (await api.get("/calendars/x")).json()["version"] == 1


async def test_an_icalendar_body_adds_its_dates(api: Client) -> None:
    days = ["2031-01-02", "2030-12-25", "2030-07-04"]  # in no order, one the file repeats
    await api.post("/calendars", json={"name": "closures", "dates": days})
    headers = {"Content-Type": "text/calendar"}
    imported = await api.post("/calendars/closures/import", content=ICS, headers=headers)
    assert imported.status_code == 200, imported.text
    # Each date where it first came: the calendar's own, then the file's new ones.
    assert imported.json()["dates"] == [*days, "2030-12-24"]
    assert imported.json()["yearly"] == ["01-01"]
    assert imported.headers["etag"] == '"2"'
    broken = ICS.replace("BEGIN:VEVENT\r\nUID:closed", "BEGIN:VEVENT\r\nUID closed", 1)
    answer = await api.post("/calendars/closures/import", content=broken, headers=headers)
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["field"] == "body"
    assert "line" in answer.json()["errors"][0]["message"]
    wrong = await api.post(
        "/calendars/closures/import", content=ICS, headers={"Content-Type": "text/plain"}
    )
    assert wrong.status_code == 415
    assert (
        await api.post("/calendars/nope/import", content=ICS, headers=headers)
    ).status_code == 404
    stale = await api.post(
        "/calendars/closures/import", content=ICS, headers={**headers, "If-Match": '"1"'}
    )
    assert stale.status_code == 412
    assert (await api.get("/calendars/closures")).json()["version"] == 2
    # The same file again, or a patch that changes nothing, writes nothing: the calendar
    # and the tasks naming it keep their versions (their ETags).
    await api.post("/tasks", json=daily_task())
    again = await api.post("/calendars/closures/import", content=ICS, headers=headers)
    assert (again.status_code, again.headers["etag"]) == (200, '"2"')
    for patch in ({}, {"dates": [*days, "2030-12-24"]}):
        unchanged = await api.patch("/calendars/closures", json=patch)
        assert (unchanged.status_code, unchanged.headers["etag"]) == (200, '"2"')
    assert (await api.get("/tasks/payroll")).json()["version"] == 1


async def test_an_import_expands_recurrences_and_exdates_take_occurrences_out(
    api: Client,
) -> None:
    await api.post("/calendars", json={"name": "closures"})
    headers = {"Content-Type": "text/calendar"}
    events = [
        # As Outlook writes Memorial Day: the last Monday of May.
        [
            "UID:memorial",
            "SUMMARY:Memorial Day",
            "DTSTART;VALUE=DATE:20300527",
            "RRULE:FREQ=YEARLY;BYMONTH=5;BYDAY=-1MO;UNTIL=20330101",
        ],
        # Every other Friday, four times, the second taken out (and a Thursday it never
        # falls on, which is no date of the calendar either).
        [
            "UID:fridays",
            "DTSTART;VALUE=DATE:20300104",
            "RRULE:FREQ=WEEKLY;INTERVAL=2;COUNT=4",
            "EXDATE;VALUE=DATE:20300118,20300117",
        ],
        # No end: followed through the end of the year 20 years after today.
        [
            "UID:solstice",
            "DTSTART;VALUE=DATE:20300621",
            "RRULE:FREQ=YEARLY;BYMONTHDAY=21;BYMONTH=6",
        ],
    ]
    lines = [line for event in events for line in ["BEGIN:VEVENT", *event, "END:VEVENT"]]
    body = "\r\n".join(["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//test//EN", *lines])
    body += "\r\nEND:VCALENDAR\r\n"
    imported = await api.post("/calendars/closures/import", content=body, headers=headers)
    assert imported.status_code == 200, imported.text
    dates = imported.json()["dates"]
    last_year = datetime.now(UTC).year + 20
    solstices = [f"{year}-06-21" for year in range(2030, last_year + 1)]
    memorial = ["2030-05-27", "2031-05-26", "2032-05-31"]
    fridays = ["2030-01-04", "2030-02-01", "2030-02-15"]
    assert sorted(dates) == sorted([*memorial, *fridays, *solstices])
    assert imported.json()["yearly"] == []

    # Every day from 2000 on is more dates than a calendar holds: a 422 naming the
    # event, nothing written.
    daily = body.replace("UID:fridays", "UID:fridays\r\nSUMMARY:Daily").replace(
        "DTSTART;VALUE=DATE:20300104\r\nRRULE:FREQ=WEEKLY;INTERVAL=2;COUNT=4",
        "DTSTART;VALUE=DATE:20000101\r\nRRULE:FREQ=DAILY",
    )
    refused = await api.post("/calendars/closures/import", content=daily, headers=headers)
    assert refused.status_code == 422, refused.text
    [error] = refused.json()["errors"]
    assert error["field"] == "body"
    assert error["message"].startswith(
        "event Daily: repeats on more than the 10,000 dates a calendar holds"
    )
    # A date that is no date: a 422 naming its line.
    bad = body.replace("DTSTART;VALUE=DATE:20300527", "DTSTART;VALUE=DATE:20300532")
    refused = await api.post("/calendars/closures/import", content=bad, headers=headers)
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"] == [
        {
            "field": "body",
            "message": "line 7 does not parse as iCalendar: Wrong date format 20300532",
        }
    ]
    assert (await api.get("/calendars/closures")).json()["version"] == 2


async def test_a_change_replans_the_tasks_naming_the_calendar(api: Client) -> None:
    assert fields_of(await api.post("/tasks", json=daily_task())) == ["trigger.calendar.name"]
    await api.post("/calendars", json={"name": "closures"})
    created = await api.post("/tasks", json=daily_task())
    assert created.status_code == 201, created.text
    task = created.json()
    first = datetime.fromisoformat(task["next_run_at"])
    assert (await api.get("/calendars/closures/tasks")).json() == {"tasks": ["payroll"]}

    closing = {"dates": [first.date().isoformat()]}
    patched = await api.patch("/calendars/closures", json=closing, headers={"If-Match": '"1"'})
    assert patched.status_code == 200, patched.text
    moved = (await api.get("/tasks/payroll")).json()
    assert datetime.fromisoformat(moved["next_run_at"]) == first + timedelta(days=1)
    assert moved["version"] == 2
    [latest, _] = (await api.get("/tasks/payroll/history")).json()["items"]
    assert latest["cause"] == "calendar" and latest["version"] == 2
    assert latest["changes"]["calendar"] == [1, 2]
    assert latest["changes"]["next_fire_at"][1] == moved["next_run_at"]

    upcoming = await api.get("/tasks/payroll/upcoming", params={"count": 1, "annotate": "true"})
    assert upcoming.status_code == 200, upcoming.text
    assert upcoming.json()["fire_times"] == [moved["next_run_at"]]
    explained = await api.get("/tasks/payroll/explain")
    assert explained.status_code == 200, explained.text

    in_use = await api.delete("/calendars/closures")
    assert in_use.status_code == 409
    assert in_use.json()["tasks"] == ["payroll"] and "payroll" in in_use.json()["detail"]
    assert (await api.delete("/tasks/payroll")).status_code == 204
    assert (await api.delete("/calendars/closures")).status_code == 204


async def test_put_and_apply_name_a_stored_calendar_or_are_422(api: Client) -> None:
    spec = daily_task(calendar="nope")
    assert fields_of(await api.put("/tasks/payroll", json=spec)) == ["trigger.calendar.name"]
    applied = await api.post("/tasks/apply", json={"tasks": [{**spec, "name": "b"}]})
    assert fields_of(applied) == ["tasks[0].trigger.calendar.name"]
    await api.post("/calendars", json={"name": "closures"})
    applied = await api.post("/tasks/apply", json={"tasks": [daily_task()]})
    assert applied.status_code == 200, applied.text
    assert (await api.put("/tasks/other", json=daily_task("other"))).status_code == 201
    assert (await api.get("/calendars/closures/tasks")).json() == {"tasks": ["other", "payroll"]}


async def test_preview_uses_the_stored_calendar_unless_one_is_lent(api: Client) -> None:
    await api.post("/calendars", json={"name": "weekend", "weekdays": ["SAT", "SUN"]})
    trigger = {
        "kind": "cron",
        "expression": "0 9 1 * *",
        "calendar": {"name": "weekend", "policy": "previous_business_day"},
    }
    body = {"trigger": trigger, "count": 1, "after": "2026-02-15T00:00:00Z", "annotate": True}
    answer = await api.post("/triggers/preview", json=body)
    assert answer.status_code == 200, answer.text
    [occurrence] = answer.json()["occurrences"]
    assert (occurrence["at"], occurrence["flags"], occurrence["rolled_from"]) == (
        "2026-02-27T09:00:00Z",
        ["rolled"],
        "2026-03-01",
    )
    lent = {**body, "calendars": [{"name": "weekend"}]}
    assert (await api.post("/triggers/preview", json=lent)).json()["fire_times"] == [
        "2026-03-01T09:00:00Z"
    ]
