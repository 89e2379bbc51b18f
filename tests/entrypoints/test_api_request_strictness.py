"""Requests an outside audit (2027-01) found read too loosely or too strictly, on both
stores (docs/api.md, "Conventions"): `{}` on a route that takes no body was a 415 unless
sent as JSON; a bare number in a query instant read as epoch seconds; a repeated query
parameter silently kept its last value."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

import pytest
from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import assert_problem, cron_task, fields

Client = AsyncTestClient[Any]
URL = "http://127.0.0.1:9/"
NO_RUN = "00000000-0000-4000-8000-000000000000"
NOT_JSON_TYPES = ["application/x-www-form-urlencoded", "text/plain", "application/octet-stream"]


@pytest.mark.parametrize("content_type", NOT_JSON_TYPES)
async def test_an_empty_object_is_no_body_whatever_its_content_type(
    api: Client, content_type: str
) -> None:
    await api.post("/tasks", json=cron_task(URL, name="t1"))
    sent = {"content-type": content_type}

    paused = await api.post("/tasks/t1/pause", content=b"{}", headers=sent)
    assert paused.status_code == 200, paused.text
    assert paused.json()["enabled"] is False
    resumed = await api.post("/tasks/t1/resume", content=b" \n{}\t", headers=sent)
    assert resumed.json()["enabled"] is True
    assert (await api.post("/tasks/t1/dry-run", content=b"{ }", headers=sent)).status_code == 200
    fired = await api.post("/tasks/t1/runs", content=b"{}", headers=sent)
    assert fired.status_code == 202, fired.text
    # The route's own answer, not a 415: there is no such run or backfill.
    for path in (f"/runs/{NO_RUN}/cancel", f"/backfills/{NO_RUN}/cancel"):
        assert_problem(await api.post(path, content=b"{}", headers=sent), 404)


@pytest.mark.parametrize("content_type", NOT_JSON_TYPES)
async def test_a_body_with_members_is_a_422_and_text_not_json_a_415_whatever_its_type(
    api: Client, content_type: str
) -> None:
    await api.post("/tasks", json=cron_task(URL, name="t1"))
    sent = {"content-type": content_type}

    problem = assert_problem(
        await api.post("/tasks/t1/pause", content=b'{"x": 1}', headers=sent), 422
    )
    assert fields(problem) == ["x"]
    assert_problem(await api.post("/tasks/t1/runs", content=b"x=1", headers=sent), 415)
    assert (await api.get("/tasks/t1")).json()["enabled"] is True  # nothing done
    assert (await api.get("/tasks/t1/runs")).json()["items"] == []


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/runs?since=1796300000", "since"),
        ("/runs?until=0.5", "until"),
        ("/runs?since=1e9", "since"),
        ("/runs?since=nan", "since"),
        ("/runs?until=2026-01-01", "until"),
        ("/runs?since=2026-01-01T00:00:00", "since"),  # no offset
        ("/runs?since=2026-13-01T00:00:00Z", "since"),
        ("/runs?since=", "since"),
        ("/tasks/t1/explain?at=0.5", "at"),
        ("/tasks/t1/explain?at=1796300000", "at"),
        ("/tasks/t1/explain?at=tomorrow", "at"),
    ],
)
async def test_a_query_instant_is_rfc_3339_with_an_offset(
    api: Client, path: str, name: str
) -> None:
    await api.post("/tasks", json=cron_task(URL, name="t1"))

    problem = assert_problem(await api.get(path), 422)
    assert fields(problem) == [name]
    assert "RFC 3339" in problem["errors"][0]["message"]


def _query_instant(instant: datetime, offset: timedelta, *, fraction: bool = False) -> str:
    """`instant` written at `offset` (a `+` escaped as a query needs it)."""
    text = instant.astimezone(timezone(offset)).isoformat(timespec="milliseconds")
    if not fraction:
        text = text.replace(".000", "")
    return quote(text.replace("+00:00", "z"))


async def test_the_documented_instant_forms_still_work(api: Client) -> None:
    await api.post("/tasks", json=cron_task(URL, name="t1"))
    fired = await api.post("/tasks/t1/runs")
    assert fired.status_code == 202, fired.text
    at = datetime.fromisoformat(fired.json()["scheduled_for"])
    minute, ist, pst = timedelta(minutes=1), timedelta(hours=5, minutes=30), timedelta(hours=-8)

    # Each bound read at its own offset: the run is listed only when it lies between.
    for since, until, listed in (
        (_query_instant(at - minute, ist), _query_instant(at + minute, pst), True),
        (_query_instant(at + minute, ist), _query_instant(at + 2 * minute, pst), False),
        (_query_instant(at - 2 * minute, pst), _query_instant(at - minute, ist), False),
        (_query_instant(at, timedelta(0), fraction=True), _query_instant(at + minute, ist), True),
    ):
        answer = await api.get(f"/runs?since={since}&until={until}")
        assert answer.status_code == 200, (since, until, answer.text)
        ids = [run["id"] for run in answer.json()["items"]]
        assert ids == ([fired.json()["id"]] if listed else []), (since, until)

    # An hourly task explained at 14:30+02:00 speaks of 12:00 UTC, not of 14:00.
    hourly = cron_task(URL, name="t2")
    hourly["trigger"]["expression"] = "0 * * * *"
    await api.post("/tasks", json=hourly)
    explained = await api.get("/tasks/t2/explain?at=2030-06-01T14:30:00%2B02:00")
    assert explained.status_code == 200, explained.text
    assert explained.json()["occurrence"] == "2030-06-01T12:00:00Z"


async def test_a_plus_left_unescaped_in_a_query_instant_is_named(api: Client) -> None:
    # `+` in a query string is a space: the message says how to send an offset.
    problem = assert_problem(await api.get("/runs?since=2026-01-01T00:00:00+01:00"), 422)
    assert fields(problem) == ["since"]
    assert "%2B" in problem["errors"][0]["message"]


async def test_a_query_parameter_given_twice_is_a_422_naming_it(api: Client) -> None:
    await api.post("/tasks", json=cron_task(URL, name="t1"))
    await api.post("/tasks/t1/runs")

    for path, name in [
        ("/runs?status=succeeded&status=failed", "status"),
        ("/runs?limit=5&task=t1&limit=5", "limit"),
        ("/tasks?enabled=true&enabled=false", "enabled"),
        ("/tasks/t1/explain?at=2026-01-01T00:00:00Z&at=2027-01-01T00:00:00Z", "at"),
        ("/events?cursor=a&cursor=b", "cursor"),
    ]:
        problem = assert_problem(await api.get(path), 422)
        assert fields(problem) == [name], path
        assert "given twice" in problem["errors"][0]["message"]
    problem = assert_problem(await api.post("/tasks/t1/runs?x=1&x=2"), 422)
    assert "unknown query parameter" in problem["errors"][0]["message"]
    assert len((await api.get("/tasks/t1/runs")).json()["items"]) == 1  # nothing fired


async def test_a_body_nested_deeper_than_the_parser_reads_is_a_400_on_every_route(
    api: Client,
) -> None:
    # Valid JSON, but deeper than pydantic's parser goes: POST said 400 "not valid JSON:
    # recursion limit exceeded", PUT and apply a 422 on `body`. Now one answer.
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(250):
        inner["a"] = {}
        inner = inner["a"]
    task = cron_task(URL, name="deep") | {"target": {"url": URL, "body": deep}}
    for method, path, body in (
        ("POST", "/tasks", task),
        ("PUT", "/tasks/deep", task),
        ("POST", "/tasks/apply", {"tasks": [task]}),
    ):
        problem = assert_problem(await api.request(method, path, json=body), 400)
        assert problem["detail"] == "the request body nests arrays and objects more than 200 deep"
    assert (await api.get("/tasks")).json()["items"] == []
