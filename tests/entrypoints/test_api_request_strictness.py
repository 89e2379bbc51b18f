"""Requests an outside audit (2027-01) found read too loosely or too strictly, on both
stores (docs/api.md, "Conventions"): `{}` on a route that takes no body was a 415 unless
sent as JSON; a bare number in a query instant read as epoch seconds; a repeated query
parameter silently kept its last value."""

from __future__ import annotations

from typing import Any

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
