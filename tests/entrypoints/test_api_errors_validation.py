"""Error table rows 422, 400 and 415 (docs/api.md "Errors"): each a problem, nothing written."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tests.entrypoints.helpers import Client, assert_problem, cron_task, fields, task_count
from tests.fixtures.target import RecordingTarget


async def test_bad_cron_expression_names_the_field(
    client: Client, recording_target: RecordingTarget
) -> None:
    body = cron_task(recording_target.url())
    body["trigger"]["expression"] = "61 * * * *"

    problem = assert_problem(await client.post("/tasks", json=body), 422)

    assert fields(problem) == ["trigger.expression"]
    assert "minute" in problem["errors"][0]["message"]
    assert await task_count(client) == 0


async def test_unknown_timezone_names_the_field(
    client: Client, recording_target: RecordingTarget
) -> None:
    body = cron_task(recording_target.url())
    body["trigger"]["timezone"] = "Mars/Olympus_Mons"

    problem = assert_problem(await client.post("/tasks", json=body), 422)

    assert fields(problem) == ["trigger.timezone"]
    assert await task_count(client) == 0


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("", "must not be empty: 1 to 200 characters, letters A-Z and a-z, digits"),
        ("x" * 300, "is 300 characters long, more than the 200 allowed"),
        (
            "tâche-été-✓",
            "may hold only letters A-Z and a-z, digits, '.', '_' and '-', not 'â', 'é', '✓'",
        ),
    ],
)
async def test_a_bad_name_or_tag_is_said_in_words_not_as_a_pattern(
    client: Client, recording_target: RecordingTarget, name: str, words: str
) -> None:
    body = cron_task(recording_target.url()) | {"name": name, "tags": ["ok", "not ok"]}

    problem = assert_problem(await client.post("/tasks", json=body), 422)

    messages = {error["field"]: error["message"] for error in problem["errors"]}
    assert messages["name"].startswith(words)
    assert (
        messages["tags.1"] == "may hold only letters A-Z and a-z, digits, '.', '_' and '-', not ' '"
    )
    assert "pattern" not in problem["detail"]
    assert await task_count(client) == 0


async def test_a_trigger_without_kind_or_an_auth_without_type_names_the_missing_member(
    client: Client, recording_target: RecordingTarget
) -> None:
    body = cron_task(recording_target.url())
    del body["trigger"]["kind"]
    body["target"]["auth"] = {"token_env": "REPORTS_TOKEN"}

    problem = assert_problem(await client.post("/tasks", json=body), 422)

    assert sorted(fields(problem)) == ["target.auth.type", "trigger.kind"]
    assert await task_count(client) == 0


async def test_an_unknown_kind_names_the_kinds_there_are(
    client: Client, recording_target: RecordingTarget
) -> None:
    body = cron_task(recording_target.url())
    body["trigger"]["kind"] = "weekly"

    problem = assert_problem(await client.post("/tasks", json=body), 422)

    assert fields(problem) == ["trigger.kind"]
    assert "'cron', 'interval', 'calendar', 'one_shot'" in problem["errors"][0]["message"]


async def test_unknown_field_is_named_by_its_own_path(
    client: Client, recording_target: RecordingTarget
) -> None:
    body = cron_task(recording_target.url(), enabeld=False)
    body["target"]["timeout"] = 5

    problem = assert_problem(await client.post("/tasks", json=body), 422)

    assert sorted(fields(problem)) == ["enabeld", "target.timeout"]
    assert {error["message"] for error in problem["errors"]} == {"unknown field"}
    assert await task_count(client) == 0


@pytest.mark.parametrize("member", ["calendar", "cron", "bearer", "oauth2_client_credentials"])
async def test_an_unknown_field_named_like_a_kind_is_named_too(
    client: Client, recording_target: RecordingTarget, member: str
) -> None:
    """A task's top-level field that shares its name with a trigger kind or an auth type
    (a guess such as `"calendar": "holidays"` beside the trigger) is named, not `body`:
    only under `trigger` and `auth` are those words a union's member."""
    body = cron_task(recording_target.url()) | {member: "holidays"}

    created = assert_problem(await client.post("/tasks", json=body), 422)
    put = assert_problem(await client.put("/tasks/nightly-report", json=body), 422)

    assert fields(created) == fields(put) == [member]
    assert created["errors"][0]["message"] == "unknown field"
    assert await task_count(client) == 0
    await client.post("/tasks", json=cron_task(recording_target.url()))
    patched = assert_problem(await client.patch("/tasks/nightly-report", json={member: "x"}), 422)
    assert fields(patched) == [member]
    assert (await client.get("/tasks/nightly-report")).json()["version"] == 1


async def test_an_unknown_field_in_a_merge_patch_is_named_and_changes_nothing(
    client: Client, recording_target: RecordingTarget
) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))

    response = await client.patch(
        "/tasks/nightly-report", json={"description": "x", "target": {"retries": 3}}
    )

    assert fields(assert_problem(response, 422)) == ["target.retries"]
    assert (await client.get("/tasks/nightly-report")).json()["version"] == 1


@pytest.mark.parametrize(
    ("patch", "named"),
    [
        ({"descripton": None}, ["descripton"]),
        ({"target": {"retry": {"max_attempt": None}}}, ["target.retry.max_attempt"]),
        ({"next_run_at": None, "version": None}, ["next_run_at", "version"]),
        ({"notify": {"url": "http://127.0.0.1:1/", "bogus": None}}, ["notify.bogus"]),
        ({"bogus": None, "max_running_instances": 0}, ["bogus", "max_running_instances"]),
    ],
)
async def test_removing_a_field_the_task_does_not_have_is_an_unknown_field(
    client: Client, recording_target: RecordingTarget, patch: dict[str, object], named: list[str]
) -> None:
    # A typo in a merge patch's null would otherwise do nothing, silently.
    await client.post("/tasks", json=cron_task(recording_target.url()))

    problem = assert_problem(await client.patch("/tasks/nightly-report", json=patch), 422)

    assert sorted(fields(problem)) == named
    assert (await client.get("/tasks/nightly-report")).json()["version"] == 1
    assert (await client.get("/tasks/nightly-report/history")).json()["items"][0]["version"] == 1


async def test_removing_a_header_the_target_does_not_send_is_allowed(
    client: Client, recording_target: RecordingTarget
) -> None:
    # Headers are an open object: RFC 7396 removes a member whether or not it is there.
    await client.post("/tasks", json=cron_task(recording_target.url()))

    response = await client.patch(
        "/tasks/nightly-report", json={"target": {"headers": {"X-No": None}}}
    )

    assert response.status_code == 200


async def test_one_shot_in_the_past_beyond_the_grace_is_rejected(
    client: Client, recording_target: RecordingTarget
) -> None:
    past = (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()
    body = {
        "name": "too-late",
        "trigger": {"kind": "one_shot", "run_at": past},
        "target": {"url": recording_target.url()},
    }

    problem = assert_problem(await client.post("/tasks", json=body), 422)

    assert fields(problem) == ["trigger.run_at"]
    assert await task_count(client) == 0


@pytest.mark.parametrize("limit", ["0", "501", "many"])
async def test_a_limit_outside_1_to_500_is_rejected(client: Client, limit: str) -> None:
    problem = assert_problem(await client.get("/tasks", params={"limit": limit}), 422)

    assert fields(problem) == ["limit"]


async def test_a_limit_outside_1_to_500_is_rejected_on_run_history(
    client: Client, recording_target: RecordingTarget
) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))

    response = await client.get("/tasks/nightly-report/runs", params={"limit": "501"})

    assert fields(assert_problem(response, 422)) == ["limit"]


async def test_a_cursor_this_service_did_not_issue_is_rejected(client: Client) -> None:
    problem = assert_problem(await client.get("/tasks", params={"cursor": "not-a-cursor"}), 422)

    assert fields(problem) == ["cursor"]


async def test_preview_of_a_bad_trigger_names_the_field(client: Client) -> None:
    body = {"trigger": {"kind": "interval", "every": 0}, "count": 3}

    problem = assert_problem(await client.post("/triggers/preview", json=body), 422)

    assert fields(problem) == ["trigger.every"]


async def test_preview_after_an_instant_that_overflows_in_utc_names_after(client: Client) -> None:
    # Year 1 at +13:12 is before year 1 in UTC (found by Schemathesis: a 500 before).
    trigger = {"kind": "cron", "expression": "* * * * *"}
    body = {"trigger": trigger, "count": 3, "after": "0001-01-01T00:00:00+13:12"}

    problem = assert_problem(await client.post("/triggers/preview", json=body), 422)

    assert fields(problem) == ["after"]


async def test_a_patch_that_makes_the_task_invalid_changes_nothing(
    client: Client, recording_target: RecordingTarget
) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))

    response = await client.patch(
        "/tasks/nightly-report", json={"trigger": {"kind": "cron", "expression": "0 0 30 2 *"}}
    )

    assert fields(assert_problem(response, 422)) == ["trigger.expression"]
    task = (await client.get("/tasks/nightly-report")).json()
    assert task["version"] == 1 and task["trigger"]["expression"] == "30 2 * * *"


async def test_a_patch_that_is_not_an_object_is_rejected(
    client: Client, recording_target: RecordingTarget
) -> None:
    await client.post("/tasks", json=cron_task(recording_target.url()))

    response = await client.patch("/tasks/nightly-report", json=["enabled", False])

    assert fields(assert_problem(response, 422)) == ["body"]


async def test_a_missing_body_is_rejected(client: Client) -> None:
    problem = assert_problem(await client.post("/tasks"), 422)

    assert fields(problem) == ["body"]


# -- malformed requests (400, 415) -----------------------------------------------------


async def test_malformed_json_is_a_400_that_says_so(client: Client) -> None:
    response = await client.post(
        "/tasks", content=b'{"name": "x",', headers={"Content-Type": "application/json"}
    )

    assert "not valid JSON" in assert_problem(response, 400)["detail"]
    assert await task_count(client) == 0


JSON_TYPE = {"Content-Type": "application/json"}


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
async def test_a_number_json_has_not_is_a_400_on_every_route(api: Client, number: str) -> None:
    # pydantic's parser reads them; PostgreSQL's jsonb does not (POST /tasks was a 500).
    task = (
        '{"name": "nightly-report", "trigger": {"kind": "interval", "every": 60},'
        f' "target": {{"url": "http://127.0.0.1:9/", "body": {{"ratio": {number}}}}}}}'
    )
    sent = [
        await api.post("/tasks", content=task, headers=JSON_TYPE),
        await api.put("/tasks/nightly-report", content=task, headers=JSON_TYPE),
        await api.post("/tasks/apply", content=f'{{"tasks": [{task}]}}', headers=JSON_TYPE),
        await api.post("/tasks", content=number, headers=JSON_TYPE),
    ]

    for response in sent:
        detail = assert_problem(response, 400)["detail"]
        assert detail.endswith(f"not valid JSON: {number} is not a JSON number")
    assert await task_count(api) == 0


async def test_a_target_body_number_too_large_for_json_is_refused(api: Client) -> None:
    # 1e400 parses as infinity, which the stored jsonb refused: a 500.
    task = (
        '{"name": "nightly-report", "trigger": {"kind": "interval", "every": 60},'
        ' "target": {"url": "http://127.0.0.1:9/", "body": {"ratio": [1, -1e400]}}}'
    )
    sent = [
        await api.post("/tasks", content=task, headers=JSON_TYPE),
        await api.put("/tasks/nightly-report", content=task, headers=JSON_TYPE),
        await api.post("/tasks/apply", content=f'{{"tasks": [{task}]}}', headers=JSON_TYPE),
    ]

    for response in sent:
        assert fields(assert_problem(response, 422))[-1].endswith("target.body")
        assert "too large for JSON" in response.text
    assert await task_count(api) == 0


async def test_a_body_that_is_not_json_is_a_415(
    client: Client, recording_target: RecordingTarget
) -> None:
    response = await client.post(
        "/tasks", content=b"name=x", headers={"Content-Type": "application/x-www-form-urlencoded"}
    )

    assert "application/json" in assert_problem(response, 415)["detail"]


async def test_a_template_reading_a_dunder_attribute_is_refused_when_written(
    client: Client, recording_target: RecordingTarget
) -> None:
    # The sandbox refuses `__class__` at every render: accepted, the task would fail
    # every run. It is a 422 at create, naming the string, nothing written.
    body = cron_task(recording_target.url())
    body["target"]["template"] = True
    body["target"]["body"] = {"probe": "{{ task.__class__.__mro__ }}"}

    problem = assert_problem(await client.post("/tasks", json=body), 422)

    assert fields(problem) == ["target.body.probe"]
    assert "__class__" in problem["errors"][0]["message"]
    assert await task_count(client) == 0


async def test_a_bound_is_said_in_the_api_s_words_not_the_validator_s(
    client: Client, recording_target: RecordingTarget
) -> None:
    """A value past a length or number bound is named with the bound and what was sent
    (a console audit saw "String should have at most 10000 characters")."""
    body = cron_task(recording_target.url()) | {"description": "x" * 10_001}
    body["target"]["retry"] = {"max_attempts": 11}
    body["max_running_instances"] = 0

    problem = assert_problem(await client.post("/tasks", json=body), 422)

    assert {error["field"]: error["message"] for error in problem["errors"]} == {
        "description": "is 10001 characters long, more than the 10000 allowed",
        "target.retry.max_attempts": "must be at most 10, not 11",
        "max_running_instances": "must be at least 1, not 0",
    }
    assert await task_count(client) == 0
