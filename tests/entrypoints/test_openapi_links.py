"""The OpenAPI document leads from one operation to the next (links), and its unions
accept what the server answers: what generated clients and .ci/fuzz's stateful
Schemathesis run rely on."""

from __future__ import annotations

import re
from typing import Any

from litestar.testing import AsyncTestClient

from entrypoints.http.links import TASK_EXAMPLE
from tests.entrypoints.helpers import recent_days

Client = AsyncTestClient[Any]


def operations(document: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    return {
        operation["operationId"]: (method, path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if isinstance(operation, dict) and "operationId" in operation
    }


async def test_following_the_links_of_a_created_task_reaches_it_and_its_run(
    client: Client,
) -> None:
    document = (await client.get("/schema/openapi.json")).json()
    by_id = operations(document)

    async def follow(source: str, status: str, answer: dict[str, Any]) -> dict[str, int]:
        reached = {}
        for link in by_id[source][2]["responses"][status]["links"].values():
            method, path, _ = by_id[link["operationId"]]
            if link["operationId"] == "deleteTask":
                continue
            expression = link["parameters"]["id"]
            assert expression.startswith("$response.body#/")
            value = answer[expression.removeprefix("$response.body#/")]
            url = re.sub(r"\{id\}", str(value), path)
            reached[link["operationId"]] = (await client.request(method.upper(), url)).status_code
        return reached

    created = await client.post("/tasks", json=TASK_EXAMPLE)
    assert created.status_code == 201, created.text
    from_task = await follow("createTask", "201", created.json())
    assert {
        "getTask",
        "pauseTask",
        "resumeTask",
        "fireTask",
        "listTaskRuns",
        "backfillTask",
        "explainOccurrence",
        "getTaskHistory",
    } <= set(from_task)
    # Followed without a body or query, those that need one answer that they do.
    needs_input = {"updateTask", "backfillTask", "explainOccurrence"}
    assert all(status < 400 or op in needs_input for op, status in from_task.items()), from_task
    assert from_task["getTaskHistory"] == 200

    fired = await client.post(f"/tasks/{created.json()['id']}/runs")
    from_run = await follow("fireTask", "202", fired.json())
    assert from_run["getRun"] == 200
    assert from_run["cancelRun"] in (202, 409)  # 409 once the run has finished

    # A backfill leads to itself and its cancel.
    task_id = created.json()["id"]
    paused = (await client.post(f"/tasks/{task_id}/pause")).json()
    assert paused["enabled"] is False  # "allow_all" backfills a paused task too
    made = await client.post(
        f"/tasks/{task_id}/backfill",
        json={
            "start": recent_days(4, 2)[0].isoformat(),
            "end": recent_days(4, 2)[1].isoformat(),
            "overlap": "allow_all",
        },
    )
    assert made.status_code == 202, made.text
    from_backfill = await follow("backfillTask", "202", made.json())
    assert from_backfill == {"getBackfill": 200, "cancelBackfill": 202}


async def test_no_one_of_offers_both_integer_and_number(client: Client) -> None:
    document = (await client.get("/schema/openapi.json")).json()
    found: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            types = {alt.get("type") for alt in node.get("oneOf", []) if isinstance(alt, dict)}
            if {"integer", "number"} <= types:
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)
    assert found == []
