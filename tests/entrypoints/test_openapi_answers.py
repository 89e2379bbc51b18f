"""The OpenAPI document declares every answer the server gives (an outside audit,
2027-01, found a created PUT's 201, a dry-run backfill's 200 and the no-body rules'
400/415/422 missing) and every body it takes: a PUT by name may leave `name` out. Each
answer is provoked here and looked up in the document, so the two cannot drift apart."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import cron_task, recent_days

Client = AsyncTestClient[Any]
URL = "http://127.0.0.1:9/"
NO_RUN = "00000000-0000-4000-8000-000000000000"
FORM = {"content-type": "application/x-www-form-urlencoded"}


def operation(document: dict[str, Any], operation_id: str) -> dict[str, Any]:
    for item in document["paths"].values():
        for found in item.values():
            if isinstance(found, dict) and found.get("operationId") == operation_id:
                return found
    raise AssertionError(f"no operation {operation_id}")


def declared(document: dict[str, Any], operation_id: str, status: int) -> dict[str, Any]:
    responses = operation(document, operation_id)["responses"]
    assert str(status) in responses, (operation_id, status, sorted(responses))
    answer: dict[str, Any] = responses[str(status)]
    return answer


async def test_a_put_that_creates_answers_a_declared_201_with_its_etag(
    client: Client, document: dict[str, Any]
) -> None:
    created = await client.put(
        "/tasks/t1", json={k: v for k, v in cron_task(URL).items() if k != "name"}
    )
    assert created.status_code == 201, created.text
    assert "ETag" in declared(document, "putTask", 201)["headers"]
    assert (await client.put("/tasks/t1", json=cron_task(URL, name="t1"))).status_code == 200
    declared(document, "putTask", 200)

    assert (await client.put("/calendars/c", json={"dates": ["2026-01-01"]})).status_code == 201
    assert "ETag" in declared(document, "putCalendar", 201)["headers"]
    declared(document, "putCalendar", 200)


async def test_a_put_by_name_may_leave_the_name_out_and_a_post_may_not(
    document: dict[str, Any],
) -> None:
    schemas = document["components"]["schemas"]

    def body_schema(operation_id: str) -> dict[str, Any]:
        ref = operation(document, operation_id)["requestBody"]["content"]["application/json"]
        found: dict[str, Any] = schemas[ref["schema"]["$ref"].rsplit("/", 1)[-1]]
        return found

    for put, post in (("putTask", "createTask"), ("putCalendar", "createCalendar")):
        assert "name" in body_schema(post)["required"], post
        assert "name" not in body_schema(put).get("required", []), put
        assert "name" in body_schema(put)["properties"], put
        assert body_schema(put)["additionalProperties"] is False, put


async def test_a_dry_run_backfill_answers_a_declared_200(
    client: Client, document: dict[str, Any]
) -> None:
    await client.post("/tasks", json=cron_task(URL, name="t1"))
    first, last = recent_days()
    window = {"start": first.isoformat(), "end": last.isoformat()}

    dry = await client.post("/tasks/t1/backfill", json=window | {"dry_run": True})
    assert dry.status_code == 200, dry.text
    schema = declared(document, "backfillTask", 200)["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/BackfillAnswer"}
    made = await client.post("/tasks/t1/backfill", json=window | {"overlap": "allow_all"})
    assert made.status_code == 202, made.text
    declared(document, "backfillTask", 202)


async def test_the_no_body_routes_declare_what_they_answer_a_body(
    client: Client, document: dict[str, Any]
) -> None:
    await client.post("/tasks", json=cron_task(URL, name="t1"))
    routes = {
        "fireTask": "/tasks/t1/runs",
        "pauseTask": "/tasks/t1/pause",
        "resumeTask": "/tasks/t1/resume",
        "dryRunTask": "/tasks/t1/dry-run",
        "cancelRun": f"/runs/{NO_RUN}/cancel",
        "cancelBackfill": f"/backfills/{NO_RUN}/cancel",
    }
    for operation_id, path in routes.items():
        for body, headers, status in [
            (b"{", {"content-type": "application/json"}, 400),
            (b"x=1", FORM, 415),
            (b'{"x": 1}', FORM, 422),
        ]:
            answer = await client.post(path, content=body, headers=headers)
            assert answer.status_code == status, (path, body, answer.text)
            declared(document, operation_id, status)
