"""Strict JSON types in request bodies (docs/api.md, "Conventions": "Strict JSON types",
"No body", "Query booleans"), found by an outside audit: a wrong JSON type was once
converted ("false" stored false, "30" stored 30, 1700000000 read as an epoch instant).
Each is now a 422 naming the member as the client wrote it, with nothing written, on
both stores; every documented form of a field still works."""

from __future__ import annotations

import json
from datetime import timedelta, timezone
from typing import Any

from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import assert_problem, cron_task, fields, recent_days

Client = AsyncTestClient[Any]
URL = "http://127.0.0.1:9/"
CALENDAR_TRIGGER = {"kind": "calendar", "days": 1, "hour": 9}

# (what the body changes, the field named, words of the message)
WRONG_TYPES: list[tuple[dict[str, Any], str, str]] = [
    ({"enabled": "false"}, "enabled", "must be a boolean (true or false), not a string"),
    ({"enabled": 0}, "enabled", "must be a boolean (true or false), not an integer"),
    ({"target": {"url": URL, "template": "yes"}}, "target.template", "not a string"),
    ({"target": {"url": URL, "template": 1}}, "target.template", "not an integer"),
    ({"pause_after_failures": True}, "pause_after_failures", "integer, not a boolean"),
    ({"target": {"url": URL, "timeout_seconds": True}}, "target.timeout_seconds", "number"),
    ({"target": {"url": URL, "timeout_seconds": "30"}}, "target.timeout_seconds", "string"),
    ({"max_running_instances": "2"}, "max_running_instances", "must be an integer"),
    ({"misfire_grace_seconds": "60"}, "misfire_grace_seconds", "must be an integer"),
    (
        {"target": {"url": URL, "retry": {"max_attempts": "3"}}},
        "target.retry.max_attempts",
        "must be an integer, not a string",
    ),
    ({"trigger": CALENDAR_TRIGGER | {"hour": "9"}}, "trigger.hour", "must be an integer"),
    ({"trigger": CALENDAR_TRIGGER | {"days": "1"}}, "trigger.days", "must be an integer"),
    ({"jitter_seconds": 2.0}, "jitter_seconds", "without a decimal point (2, not 2.0)"),
    ({"jitter_seconds": 2.5}, "jitter_seconds", "must be an integer"),
    (
        {"trigger": {"kind": "interval", "every": 60, "start_at": 1700000000}},
        "trigger.start_at",
        "must be an RFC 3339 date-time string",
    ),
    (
        {"trigger": {"kind": "one_shot", "run_at": 4102444800}},
        "trigger.run_at",
        "not an integer",
    ),
    ({"trigger": {"kind": "interval", "every": True}}, "trigger.every", "not a boolean"),
    ({"trigger": {"kind": "interval", "every": "900"}}, "trigger.every", "ISO 8601"),
    ({"tags": "reports"}, "tags", "must be an array, not a string"),
    ({"target": URL}, "target", "must be an object, not a string"),
    ({"notify": {"url": URL, "events": "run.failed"}}, "notify.events", "array"),
]

# Every documented form that must keep working (docs/api.md, docs/triggers.md).
ALTERNATIVE_FORMS: list[dict[str, Any]] = [
    {"trigger": {"kind": "interval", "every": "PT15M", "start_at": "2026-01-01T00:00:00Z"}},
    {"trigger": {"kind": "interval", "every": 900, "start_at": "2026-01-01T00:00:00"}},
    {"trigger": {"kind": "interval", "every": 900.0, "anchor": "2026-01-01T05:30:00+05:30"}},
    {"trigger": {"kind": "interval", "every": "p1d", "end_at": "2099-01-01T00:00:00Z"}},
    {
        "trigger": CALENDAR_TRIGGER
        | {"start_date": "2026-01-31", "dst": {"gap": "skip", "fold": "both"}}
    },
    {"trigger": {"kind": "one_shot", "run_at": "2099-03-08T02:30:00", "timezone": "UTC"}},
    {"trigger": {"kind": "one_shot", "run_at": "2099-03-08T02:30:00.5+01:00"}},
    {
        "target": {
            "url": URL,
            "method": "PUT",
            "timeout_seconds": 30,
            "retry": {"max_attempts": 3, "backoff_seconds": 1, "max_backoff_seconds": 2.5},
            "auth": {"type": "bearer", "token_env": "A_TOKEN"},
            "body": {"any": [1, 2.5, True, None, "json"]},
            "template": False,
        },
        "enabled": False,
        "misfire_grace_seconds": None,
        "pause_after_failures": None,
        "jitter_seconds": 0,
        "catch_up": "all",
        "overlap": "buffer_all",
        "history_limit": 5,
        "notify": {"url": URL, "events": ["run.failed", "task.recovered"]},
    },
]


async def _count(api: Client) -> int:
    return len((await api.get("/tasks")).json()["items"])


async def test_a_wrong_json_type_is_a_422_naming_the_member_on_every_task_write(
    api: Client,
) -> None:
    await api.post("/tasks", json=cron_task(URL, name="kept"))
    before = (await api.get("/tasks/kept")).json()
    for change, field, words in WRONG_TYPES:
        body = cron_task(URL, name="bad") | change
        spec = {key: value for key, value in body.items() if key != "name"}
        answers = {
            "POST /tasks": (await api.post("/tasks", json=body), ""),
            "PUT /tasks/bad": (await api.put("/tasks/bad", json=spec), ""),
            "PUT /tasks/kept": (await api.put("/tasks/kept", json=spec), ""),
            "apply": (await api.post("/tasks/apply", json={"tasks": [body]}), "tasks[0]."),
            "PATCH": (await api.patch("/tasks/kept", json=change), ""),
        }
        for route, (answer, prefix) in answers.items():
            problem = assert_problem(answer, 422)
            assert fields(problem) == [prefix + field], (route, change, problem)
            assert words in problem["errors"][0]["message"], (route, change, problem)
    assert await _count(api) == 1
    assert (await api.get("/tasks/kept")).json() == before


async def test_every_documented_form_is_still_accepted(api: Client) -> None:
    for i, change in enumerate(ALTERNATIVE_FORMS):
        body = cron_task(URL, name=f"form-{i}") | change
        created = await api.post("/tasks", json=body)
        assert created.status_code == 201, (change, created.text)
        spec = {key: value for key, value in body.items() if key != "name"}
        replaced = await api.put(f"/tasks/form-{i}", json=spec)
        assert replaced.status_code == 200, (change, replaced.text)
        applied = await api.post("/tasks/apply", json={"tasks": [body], "dry_run": True})
        assert applied.json()["unchanged"] == [f"form-{i}"], (change, applied.text)
        patched = await api.patch(f"/tasks/form-{i}", json=change)
        assert patched.status_code == 200, (change, patched.text)


async def test_an_interval_answers_every_as_whole_seconds_whatever_form_it_was_sent_in(
    api: Client,
) -> None:
    for every in ("PT15M", 900, 900.0):
        trigger = {"kind": "interval", "every": every}
        answer = await api.post("/tasks", json=cron_task(URL, name="iv", trigger=trigger))
        assert answer.json()["trigger"]["every"] == 900
        await api.delete("/tasks/iv")


async def test_a_merge_patch_may_still_null_nested_members_and_send_partial_objects(
    api: Client,
) -> None:
    target = {"url": URL, "headers": {"X-A": "1"}, "retry": {"max_attempts": 3}}
    await api.post("/tasks", json=cron_task(URL, name="p", target=target))
    await api.patch("/tasks/p", json={"notify": {"url": URL}})

    answer = await api.patch(
        "/tasks/p",
        json={
            "target": {"headers": {"X-A": None}, "retry": {"backoff_seconds": None}},
            "notify": {"events": ["run.failed"], "auth": None},
            "jitter_seconds": None,
        },
    )

    assert answer.status_code == 200, answer.text
    task = answer.json()
    assert task["target"]["headers"] == {}
    assert task["target"]["retry"] == {
        "max_attempts": 3,
        "backoff_seconds": 1.0,
        "max_backoff_seconds": 60.0,
    }
    assert task["notify"]["events"] == ["run.failed"]
    assert task["jitter_seconds"] == 0


async def test_every_bad_member_of_a_patch_is_named_at_once(api: Client) -> None:
    await api.post("/tasks", json=cron_task(URL, name="p"))
    before = (await api.get("/tasks/p")).json()

    patch = {
        "enabled": "true",
        "target": {"timeout_seconds": "5", "auth": {"type": "bearer", "token_env": 5}},
        "trigger": {"kind": "interval", "every": 60, "end_at": 1},
    }
    problem = assert_problem(await api.patch("/tasks/p", json=patch), 422)

    assert sorted(fields(problem)) == [
        "enabled",
        "target.auth.token_env",
        "target.timeout_seconds",
        "trigger.end_at",
    ]
    assert (await api.get("/tasks/p")).json() == before


async def test_the_other_bodies_are_strict_too(api: Client) -> None:
    await api.post("/tasks", json=cron_task(URL, name="t1"))
    trigger = {"kind": "cron", "expression": "0 9 * * *"}
    first, last = recent_days()
    range_ = {"start": first.isoformat(), "end": last.isoformat()}
    cases: list[tuple[str, str, dict[str, Any], str]] = [
        ("POST", "/triggers/preview", {"trigger": trigger, "count": "3"}, "count"),
        ("POST", "/triggers/preview", {"trigger": trigger, "after": 0}, "after"),
        ("POST", "/triggers/preview", {"trigger": trigger, "annotate": 1}, "annotate"),
        ("POST", "/triggers/preview", {"trigger": trigger | {"start_at": 0}}, "trigger.start_at"),
        ("POST", "/tasks/t1/backfill", range_ | {"dry_run": "true"}, "dry_run"),
        ("POST", "/tasks/t1/backfill", range_ | {"only_missing": 0}, "only_missing"),
        ("POST", "/tasks/t1/backfill", range_ | {"start": 1767225600}, "start"),
        ("POST", "/tasks/apply", {"tasks": [], "prune": "false"}, "prune"),
        ("POST", "/tasks/apply", {"tasks": [], "dry_run": 1}, "dry_run"),
        ("POST", "/calendars", {"name": "c", "dates": [20260101]}, "dates.0"),
        ("POST", "/calendars", {"name": "c", "description": 5}, "description"),
        ("PUT", "/calendars/c", {"weekdays": "SAT"}, "weekdays"),
    ]
    for method, path, body, field in cases:
        answer = await api.request(method, path, json=body)
        problem = assert_problem(answer, 422)
        assert fields(problem) == [field], (path, body, problem)
    assert (await api.get("/tasks/t1/runs")).json()["items"] == []
    assert (await api.get("/calendars")).json()["items"] == []

    await api.post("/calendars", json={"name": "c", "dates": ["2026-01-01"]})
    problem = assert_problem(await api.patch("/calendars/c", json={"dates": "2026-01-02"}), 422)
    assert fields(problem) == ["dates"]
    assert (await api.get("/calendars/c")).json()["version"] == 1


async def test_the_other_bodies_keep_their_documented_forms(api: Client) -> None:
    await api.post("/tasks", json=cron_task(URL, name="t1"))
    preview = await api.post(
        "/triggers/preview",
        json={
            "trigger": {"kind": "interval", "every": "PT1H", "start_at": "2026-01-01T00:00:00"},
            "count": 2,
            "after": "2026-01-01T00:30:00+00:00",
            "annotate": True,
            "calendars": [{"name": "w", "weekdays": ["sat"], "dates": ["2026-12-25"]}],
        },
    )
    assert preview.json()["fire_times"] == ["2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"]

    start, end = recent_days()  # an offset other than Z, and Z
    backfill = await api.post(
        "/tasks/t1/backfill",
        json={
            "start": start.astimezone(timezone(timedelta(hours=1))).isoformat(),
            "end": end.isoformat().replace("+00:00", "Z"),
            "only_missing": False,
            "overlap": "allow_all",
            "dry_run": True,
        },
    )
    assert backfill.status_code == 200, backfill.text

    calendar = {"dates": ["2026-01-01"], "yearly": ["12-25"], "weekdays": ["Sun"]}
    assert (await api.put("/calendars/c", json=calendar)).status_code == 201
    patched = await api.patch("/calendars/c", json={"description": None, "weekdays": ["mon"]})
    assert patched.json()["weekdays"] == ["MON"]


async def test_a_body_on_a_request_that_takes_none_is_a_422_and_nothing_happens(
    api: Client,
) -> None:
    await api.post("/tasks", json=cron_task(URL, name="t1"))
    for path in ("/tasks/t1/runs", "/tasks/t1/pause", "/tasks/t1/resume", "/tasks/t1/dry-run"):
        problem = assert_problem(await api.post(path, json={"x": 1, "force": True}), 422)
        assert fields(problem) == ["x", "force"], path
        assert problem["errors"][0]["message"] == "unknown field (this request takes no body)"
        problem = assert_problem(await api.post(path, json=[1]), 422)
        assert fields(problem) == ["body"]
        assert_problem(await api.post(path, content=b"x=1"), 400)
        form = {"content-type": "application/x-www-form-urlencoded"}
        assert_problem(await api.post(path, content=b"x=1", headers=form), 415)
    run_id = "00000000-0000-4000-8000-000000000000"
    for path in (f"/runs/{run_id}/cancel", f"/backfills/{run_id}/cancel"):
        problem = assert_problem(await api.post(path, json={"x": 1}), 422)
        assert fields(problem) == ["x"], path

    assert (await api.get("/tasks/t1/runs")).json()["items"] == []
    task = (await api.get("/tasks/t1")).json()
    assert task["enabled"] is True
    assert task["version"] == 1


async def test_an_empty_body_or_an_empty_object_is_no_body(api: Client) -> None:
    await api.post("/tasks", json=cron_task(URL, name="t1"))
    form = {"content-type": "application/x-www-form-urlencoded"}

    paused = await api.post("/tasks/t1/pause", content=b"")
    assert paused.status_code == 200 and paused.json()["enabled"] is False
    resumed = await api.post("/tasks/t1/resume", json={})
    assert resumed.status_code == 200 and resumed.json()["enabled"] is True
    dry_run = await api.post("/tasks/t1/dry-run", content=b" {} ")
    assert dry_run.status_code == 200 and dry_run.json()["url"] == URL
    paused = await api.post("/tasks/t1/pause", content=b"", headers=form)
    assert paused.status_code == 200 and paused.json()["enabled"] is False
    fired = await api.post("/tasks/t1/runs", content=json.dumps({}).encode())
    assert fired.status_code == 202
    [run] = (await api.get("/tasks/t1/runs")).json()["items"]
    assert run["id"] == fired.json()["id"] and run["manual"] is True


async def test_query_booleans_are_true_or_false_spelt_so(api: Client) -> None:
    await api.post("/tasks", json=cron_task(URL, name="t1"))

    for value in ("1", "True", "yes", "0", ""):
        problem = assert_problem(await api.get(f"/tasks?enabled={value}"), 422)
        assert fields(problem) == ["enabled"]
        problem = assert_problem(await api.get(f"/tasks/t1/upcoming?annotate={value}"), 422)
        assert fields(problem) == ["annotate"]

    assert len((await api.get("/tasks?enabled=true")).json()["items"]) == 1
    assert (await api.get("/tasks?enabled=false")).json()["items"] == []
    assert "occurrences" in (await api.get("/tasks/t1/upcoming?annotate=true")).json()
    assert "occurrences" not in (await api.get("/tasks/t1/upcoming?annotate=false")).json()


async def test_a_query_parameter_the_route_does_not_take_is_a_422_naming_it(api: Client) -> None:
    await api.post("/tasks", json=cron_task(URL, name="t1"))
    await api.post("/tasks/t1/runs")

    # A misspelt filter once listed everything, as if it had matched.
    for path, name in [
        ("/tasks?tags=x", "tags"),
        ("/runs?state=failed", "state"),
        ("/tasks/t1/runs?statuses=failed", "statuses"),
        ("/tasks/t1?verbose=true", "verbose"),
        ("/tasks/t1/upcoming?count=3&after=2030-01-01T00:00:00Z", "after"),
        ("/events?type=run.failed", "type"),
        ("/calendars?Limit=5", "Limit"),
    ]:
        problem = assert_problem(await api.get(path), 422)
        assert fields(problem) == [name], path
        assert "unknown query parameter" in problem["errors"][0]["message"]
    problem = assert_problem(await api.post("/tasks/t1/pause?force=true"), 422)
    assert fields(problem) == ["force"]
    assert (await api.get("/tasks/t1")).json()["enabled"] is True  # nothing done

    # What each route documents still works.
    assert len((await api.get("/tasks?tag=x&enabled=true&name=t&limit=5")).json()["items"]) == 0
    assert len((await api.get("/tasks/t1/runs?status=succeeded&limit=5")).json()["items"]) <= 1
    listed = await api.get("/runs?task=t1&since=2020-01-01T00:00:00Z&limit=10")
    assert listed.status_code == 200
    assert (await api.get("/tasks/t1/upcoming?count=3&annotate=false")).status_code == 200


async def test_a_body_is_utf_8_without_a_byte_order_mark_on_every_route(api: Client) -> None:
    # json.loads would read UTF-16 and a mark; the routes it reads for refused neither.
    await api.post("/tasks", json=cron_task(URL, name="kept"))
    before = (await api.get("/tasks/kept")).json()
    body = cron_task(URL, name="new")
    spec = {key: value for key, value in body.items() if key != "name"}
    sends = {
        "POST /tasks": ("post", "/tasks", body),
        "PUT /tasks/new": ("put", "/tasks/new", spec),
        "PATCH /tasks/kept": ("patch", "/tasks/kept", {"enabled": False}),
        "apply": ("post", "/tasks/apply", {"tasks": [body]}),
        "PUT /calendars/office": ("put", "/calendars/office", {"weekdays": ["SUN"]}),
        "pause (no body)": ("post", "/tasks/kept/pause", {}),
    }
    json_type = {"content-type": "application/json"}
    for route, (method, path, data) in sends.items():
        text = json.dumps(data)
        for encoded, words in (
            (b"\xef\xbb\xbf" + text.encode(), "byte order mark"),
            (text.encode("utf-16"), "not valid JSON"),
        ):
            answer = await api.request(method, path, content=encoded, headers=json_type)
            problem = assert_problem(answer, 400)
            assert words in problem["detail"], (route, problem)
        sent = await api.request(method, path, content=text.encode(), headers=json_type)
        assert sent.status_code < 300, (route, sent.text)  # the same body in UTF-8 is taken
        if route == "PATCH /tasks/kept":
            await api.post("/tasks/kept/resume")
    assert {t["name"] for t in (await api.get("/tasks")).json()["items"]} == {"kept", "new"}
    assert (await api.get("/tasks/kept")).json()["version"] > before["version"]
