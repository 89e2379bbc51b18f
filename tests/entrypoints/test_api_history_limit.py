"""`history_limit` through the API, on both stores: validated (a 422 naming it, nothing
written), stored, returned, patchable, and taken by `PUT` and apply."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import assert_problem, cron_task, fields, task_count

Client = AsyncTestClient[Any]
URL = "http://127.0.0.1:9/hook"


async def test_history_limit_is_returned_patchable_and_clearable(api: Client) -> None:
    created = await api.post("/tasks", json=cron_task(URL, history_limit=100_000))
    assert created.status_code == 201, created.text
    assert created.json()["history_limit"] == 100_000
    assert (await api.post("/tasks", json=cron_task(URL, name="plain"))).json()[
        "history_limit"
    ] is None
    patched = await api.patch("/tasks/nightly-report", json={"history_limit": 5})
    assert patched.status_code == 200, patched.text
    assert (await api.get("/tasks/nightly-report")).json()["history_limit"] == 5
    await api.patch("/tasks/nightly-report", json={"history_limit": None})
    read = (await api.get("/tasks/nightly-report")).json()
    assert (read["history_limit"], read["version"]) == (None, 3)


async def test_put_and_apply_set_it_and_see_it_as_a_change(api: Client) -> None:
    body = cron_task(URL)
    del body["name"]
    created = await api.put("/tasks/synced", json={**body, "history_limit": 10})
    assert created.status_code == 201, created.text
    assert created.json()["history_limit"] == 10
    replaced = await api.put("/tasks/synced", json=body)
    assert (replaced.json()["history_limit"], replaced.json()["version"]) == (None, 2)
    listed = {"tasks": [{**body, "name": "synced", "history_limit": 20}]}
    applied = await api.post("/tasks/apply", json=listed)
    assert applied.json()["updated"] == ["synced"], applied.text
    assert (await api.get("/tasks/synced")).json()["history_limit"] == 20


@pytest.mark.parametrize("value", [0, -1, 100_001, 2**31, "ten", 1.5])
async def test_an_out_of_range_history_limit_is_a_422_naming_it(api: Client, value: object) -> None:
    bad = cron_task(URL, history_limit=value)
    assert fields(assert_problem(await api.post("/tasks", json=bad), 422)) == ["history_limit"]
    assert await task_count(api) == 0
    applied = await api.post("/tasks/apply", json={"tasks": [bad]})
    assert fields(assert_problem(applied, 422)) == ["tasks[0].history_limit"]
    assert await task_count(api) == 0
    await api.post("/tasks", json=cron_task(URL))
    patch = await api.patch("/tasks/nightly-report", json={"history_limit": value})
    assert fields(assert_problem(patch, 422)) == ["history_limit"]
    assert (await api.get("/tasks/nightly-report")).json()["version"] == 1
