"""The OpenAPI document leads from one operation to the next (links), and its unions
accept what the server answers: what generated clients and .ci/fuzz's stateful
Schemathesis run rely on."""

from __future__ import annotations

import re
from typing import Any

from litestar.testing import AsyncTestClient

from entrypoints.http.links import TASK_EXAMPLE

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
            assert expression == "$response.body#/id"
            url = re.sub(r"\{id\}", str(answer["id"]), path)
            reached[link["operationId"]] = (await client.request(method.upper(), url)).status_code
        return reached

    created = await client.post("/tasks", json=TASK_EXAMPLE)
    assert created.status_code == 201, created.text
    from_task = await follow("createTask", "201", created.json())
    assert {"getTask", "pauseTask", "resumeTask", "fireTask", "listTaskRuns"} <= set(from_task)
    assert all(status < 400 or op == "updateTask" for op, status in from_task.items()), from_task

    fired = await client.post(f"/tasks/{created.json()['id']}/runs")
    from_run = await follow("fireTask", "202", fired.json())
    assert from_run["getRun"] == 200
    assert from_run["cancelRun"] in (202, 409)  # 409 once the run has finished


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
