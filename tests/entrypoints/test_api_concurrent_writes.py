"""Concurrent writes without `If-Match` to one task or calendar (docs/api.md, "PATCH
/tasks/{id}": "a concurrent change is retried on the new version, never lost").

An outside audit sent 20 PATCHes of one task at once to a real server on PostgreSQL and
got 412 `stale-version` for most of them: five immediate retries ran out, and the
losers of each round collided again. Every write must land, each a version of its own.
A real `serve` over HTTP, because only there do requests interleave between the read
and the write (the in-process test client did not reproduce it). The in-memory store
reads and writes a task without yielding, so it cannot race this way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.entrypoints.helpers import cron_task
from tests.entrypoints.live import LiveServer

pytestmark = [pytest.mark.postgres]

URL = "http://127.0.0.1:9/hook"
WRITERS = 20


@pytest.fixture
def server(database_url: str, fresh_schema: str) -> Iterator[LiveServer]:
    environ = {"SCHEDULER_DATABASE_URL": database_url, "SCHEDULER_SCHEMA": fresh_schema}
    with LiveServer(environ, ["--no-engine"]) as live:
        yield live


@pytest.fixture
async def api(server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        yield client


def statuses(answers: list[httpx.Response]) -> list[int]:
    return sorted(answer.status_code for answer in answers)


async def test_concurrent_patches_of_one_task_all_land(api: httpx.AsyncClient) -> None:
    await api.post("/tasks", json=cron_task(URL, "busy"))

    answers = await asyncio.gather(
        *(api.patch("/tasks/busy", json={"description": f"e{n}"}) for n in range(WRITERS))
    )

    assert statuses(answers) == [200] * WRITERS, [a.text for a in answers]
    assert sorted(a.json()["version"] for a in answers) == list(range(2, WRITERS + 2))
    history = (await api.get("/tasks/busy/history", params={"limit": 100})).json()["items"]
    written = {v["changes"]["description"][1] for v in history if v["version"] > 1}
    assert written == {f"e{n}" for n in range(WRITERS)}  # none lost


async def test_patches_racing_pauses_and_resumes_all_land(api: httpx.AsyncClient) -> None:
    await api.post("/tasks", json=cron_task(URL, "busy"))

    answers = await asyncio.gather(
        *(api.patch("/tasks/busy", json={"description": f"e{n}"}) for n in range(10)),
        *(api.post(f"/tasks/busy/{'pause' if n % 2 else 'resume'}") for n in range(10)),
    )

    assert statuses(answers) == [200] * 20, [a.text for a in answers]
    # None lost: each patch is a version of its own, and the versions follow each other.
    history = (await api.get("/tasks/busy/history", params={"limit": 100})).json()["items"]
    versions = sorted(v["version"] for v in history)
    assert versions == list(range(1, len(versions) + 1))
    assert (await api.get("/tasks/busy")).json()["version"] == versions[-1]
    written = {
        v["changes"]["description"][1]
        for v in history
        if v["version"] > 1 and "description" in v["changes"]
    }
    assert written == {f"e{n}" for n in range(10)}


async def test_concurrent_puts_of_one_name_all_land(api: httpx.AsyncClient) -> None:
    def body(n: int) -> dict[str, Any]:
        return cron_task(URL, "shared", description=f"e{n}")

    answers = await asyncio.gather(*(api.put("/tasks/shared", json=body(n)) for n in range(10)))

    assert statuses(answers) == [200] * 9 + [201], [a.text for a in answers]
    task = (await api.get("/tasks/shared")).json()
    assert task["description"] in {f"e{n}" for n in range(10)}
    # One create and nine replacements, each a version of its own: none lost.
    assert task["version"] == 10
    history = (await api.get("/tasks/shared/history", params={"limit": 100})).json()["items"]
    assert sorted(v["version"] for v in history) == list(range(1, 11))
    replaced = {v["changes"]["description"][1] for v in history if v["version"] > 1}
    assert len(replaced) == 9 and task["description"] in replaced


async def test_concurrent_patches_of_one_calendar_all_land(api: httpx.AsyncClient) -> None:
    created = await api.post("/calendars", json={"name": "holidays", "dates": ["2030-01-01"]})
    assert created.status_code == 201, created.text

    answers = await asyncio.gather(
        *(api.patch("/calendars/holidays", json={"description": f"e{n}"}) for n in range(WRITERS))
    )

    assert statuses(answers) == [200] * WRITERS, [a.text for a in answers]
    calendar = (await api.get("/calendars/holidays")).json()
    assert calendar["version"] == WRITERS + 1


async def test_concurrent_puts_of_one_calendar_all_land(api: httpx.AsyncClient) -> None:
    # Parallel deploy jobs PUT the same calendar file: one creates it, the others
    # replace it (they answered 409 duplicate-name, as no PUT of a task does).
    def body(n: int) -> dict[str, Any]:
        return {"name": "closures", "dates": ["2030-01-01"], "description": f"e{n}"}

    answers = await asyncio.gather(
        *(api.put("/calendars/closures", json=body(n)) for n in range(10))
    )

    assert statuses(answers) == [200] * 9 + [201], [a.text for a in answers]
    # With If-None-Match: * ("create only"), the losers are told it exists: 412.
    guarded = await asyncio.gather(
        *(
            api.put(
                "/calendars/only-once", json={"name": "only-once"}, headers={"If-None-Match": "*"}
            )
            for _ in range(5)
        )
    )
    assert statuses(guarded) == [201] + [412] * 4, [a.text for a in guarded]
