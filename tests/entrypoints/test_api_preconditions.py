"""`If-Match` and `If-None-Match` on tasks, on both stores (docs/api.md, "Headers" and
"Errors"): a stale `If-Match` is a 412 `stale-version` on PATCH, PUT and DELETE alike,
and changes nothing; `If-None-Match: *` on a task that exists is a 412
`precondition-failed`."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import assert_problem, cron_task

Client = AsyncTestClient[Any]
URL = "http://127.0.0.1:9/hook"
STALE = "urn:imbi-scheduler:problem:stale-version"


async def at_version_2(api: Client) -> dict[str, Any]:
    await api.post("/tasks", json=cron_task(URL, "job"))
    response = await api.patch("/tasks/job", json={"description": "v2"})
    assert response.headers["etag"] == '"2"'
    task: dict[str, Any] = response.json()
    return task


async def history(api: Client, ref: str) -> list[int]:
    return [v["version"] for v in (await api.get(f"/tasks/{ref}/history")).json()["items"]]


async def test_put_with_a_stale_if_match_is_a_412_stale_version_as_patch_is(api: Client) -> None:
    await at_version_2(api)
    body = cron_task(URL, "job", description="v3")

    put = await api.put("/tasks/job", json=body, headers={"If-Match": '"1"'})
    patch = await api.patch("/tasks/job", json={"description": "v3"}, headers={"If-Match": '"1"'})

    assert assert_problem(put, 412)["type"] == assert_problem(patch, 412)["type"] == STALE
    assert "version 2" in put.json()["detail"]
    task = (await api.get("/tasks/job")).json()
    assert (task["version"], task["description"]) == (2, "v2")
    # An If-Match naming no version this service issues, or a task that does not exist.
    unversioned = await api.put("/tasks/job", json=body, headers={"If-Match": '"abc"'})
    assert assert_problem(unversioned, 412)["type"] == STALE
    nobody = cron_task(URL, "nobody")
    missing = await api.put("/tasks/nobody", json=nobody, headers={"If-Match": "*"})
    assert assert_problem(missing, 412)["type"] == STALE
    assert (await api.get("/tasks/nobody")).status_code == 404


async def test_put_if_none_match_on_an_existing_task_is_a_412_precondition_failed(
    api: Client,
) -> None:
    await at_version_2(api)

    response = await api.put(
        "/tasks/job", json=cron_task(URL, "job"), headers={"If-None-Match": "*"}
    )

    problem = assert_problem(response, 412)
    assert problem["type"] == "urn:imbi-scheduler:problem:precondition-failed"
    assert (await api.get("/tasks/job")).json()["version"] == 2


@pytest.mark.parametrize("if_match", ['"99"', '"1"', 'W/"1"', '"abc"', '"2", "3"'])
async def test_delete_with_a_stale_if_match_is_a_412_and_the_task_stays(
    api: Client, if_match: str
) -> None:
    task = await at_version_2(api)

    response = await api.delete(f"/tasks/{task['id']}", headers={"If-Match": if_match})

    assert assert_problem(response, 412)["type"] == STALE
    assert (await api.get("/tasks/job")).json() == task
    assert await history(api, "job") == [2, 1]


@pytest.mark.parametrize("if_match", ['"2"', 'W/"2"', "*"])
async def test_delete_with_the_tasks_version_deletes_it(api: Client, if_match: str) -> None:
    task = await at_version_2(api)

    response = await api.delete("/tasks/job", headers={"If-Match": if_match})

    assert response.status_code == 204, response.text
    assert (await api.get("/tasks/job")).status_code == 404
    assert await history(api, task["id"]) == [3, 2, 1]


async def test_delete_without_if_match_deletes_whatever_the_version(api: Client) -> None:
    await at_version_2(api)

    assert (await api.delete("/tasks/job")).status_code == 204
    assert (await api.get("/tasks/job")).status_code == 404


async def test_the_openapi_document_declares_if_match_on_delete(api: Client) -> None:
    document = (await api.get("/schema/openapi.json")).json()
    operation = document["paths"]["/tasks/{id}"]["delete"]

    headers = [p["name"] for p in operation["parameters"] if p["in"] == "header"]
    assert headers == ["If-Match"]
    assert "412" in operation["responses"]


async def test_a_calendar_put_keeps_the_same_preconditions_as_a_task_put(api: Client) -> None:
    days = {"dates": ["2027-01-01"]}
    # If-Match: * only replaces: on a calendar that does not exist nothing is created.
    missing = await api.put("/calendars/holidays", json=days, headers={"If-Match": "*"})
    assert assert_problem(missing, 412)["type"] == STALE
    assert (await api.get("/calendars/holidays")).status_code == 404

    # If-None-Match: * only creates: once it exists it is neither replaced nor changed.
    created = await api.put("/calendars/holidays", json=days, headers={"If-None-Match": "*"})
    assert created.status_code == 201, created.text
    again = await api.put(
        "/calendars/holidays", json={"dates": ["2027-01-02"]}, headers={"If-None-Match": "*"}
    )
    assert assert_problem(again, 412)["type"] == "urn:imbi-scheduler:problem:precondition-failed"
    kept = (await api.get("/calendars/holidays")).json()
    assert (kept["version"], kept["dates"]) == (1, ["2027-01-01"])

    # If-Match: * replaces what exists; another If-None-Match is not understood.
    replaced = await api.put(
        "/calendars/holidays", json={"dates": ["2027-01-03"]}, headers={"If-Match": "*"}
    )
    assert (replaced.status_code, replaced.json()["version"]) == (200, 2)
    odd = await api.put("/calendars/holidays", json=days, headers={"If-None-Match": '"2"'})
    assert assert_problem(odd, 422)["errors"][0]["field"] == "If-None-Match"


async def test_an_if_match_no_version_matches_on_a_calendar_says_read_the_calendar(
    api: Client,
) -> None:
    assert (await api.post("/calendars", json={"name": "office"})).status_code == 201

    response = await api.delete("/calendars/office", headers={"If-Match": "null"})

    detail = assert_problem(response, 412)["detail"]
    assert detail.endswith("read the calendar again and retry"), detail
    assert (await api.get("/calendars/office")).status_code == 200
