"""The OpenAPI document's constraints say what the API accepts, so that a client
generated from it, or a fuzzer driven by it, sends nothing the API then refuses for a
reason the document kept quiet about (Schemathesis found an empty `cursor` and a
weekday's name declared as any string). Each is checked against the API's own answers."""

from __future__ import annotations

import re
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

Client = AsyncTestClient[Any]
LISTS = ["/tasks", "/runs", "/events", "/calendars"]


async def test_every_cursor_is_declared_non_empty_and_an_empty_one_is_refused(
    client: Client, document: dict[str, Any]
) -> None:
    cursors = [
        (path, method, parameter)
        for path, item in document["paths"].items()
        for method, found in item.items()
        if isinstance(found, dict)
        for parameter in found.get("parameters", [])
        if parameter["name"] == "cursor"
    ]
    assert {path for path, _, _ in cursors} >= set(LISTS)
    for path, method, parameter in cursors:
        assert parameter["schema"].get("minLength") == 1, (path, method)
    for path in LISTS:
        answer = await client.get(f"{path}?cursor=")
        assert answer.status_code == 422, (path, answer.text)
        [error] = answer.json()["errors"]
        assert error["field"] == "cursor" and "leave `cursor` out" in error["message"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        *(
            ("weekdays", name)
            for name in ("MON", "mon", "Sun", "tHu", "MONDAY", "MO", "", "M0N", " MON", "Mon\n")
        ),
        *(
            ("yearly", day)
            for day in ("01-01", "02-29", "02-30", "04-30", "04-31", "12-31", "13-01", "1-01")
        ),
    ],
)
async def test_a_calendar_day_matches_its_documented_pattern_exactly_when_the_api_takes_it(
    client: Client, document: dict[str, Any], field: str, value: str
) -> None:
    items = document["components"]["schemas"]["Calendar"]["properties"][field]["items"]
    # An ECMA-262 `$` ends the string; Python's also matches before a final newline,
    # which fullmatch rules out.
    documented = re.fullmatch(items["pattern"], value) is not None
    answer = await client.post("/calendars", json={"name": "days", field: [value]})
    assert answer.status_code in (201, 422), answer.text
    assert (answer.status_code == 201) == documented, (field, value, answer.text)


async def test_the_apply_and_backfill_bodies_are_declared_closed_as_the_api_keeps_them(
    client: Client, document: dict[str, Any]
) -> None:
    schemas = document["components"]["schemas"]
    for name in ("ApplyRequest", "Selector", "BackfillBody"):
        assert schemas[name]["additionalProperties"] is False, name
    apply = await client.post("/tasks/apply", json={"tasks": [], "extra": 1})
    assert apply.status_code == 422 and apply.json()["errors"][0]["field"] == "extra"
    created = await client.post(
        "/tasks",
        json={
            "name": "nightly",
            "trigger": {"kind": "cron", "expression": "0 2 * * *"},
            "target": {"url": "http://127.0.0.1:9/"},
        },
    )
    assert created.status_code == 201, created.text
    backfill = await client.post(
        f"/tasks/{created.json()['id']}/backfill",
        json={"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z", "extra": 1},
    )
    assert backfill.status_code == 422 and backfill.json()["errors"][0]["field"] == "extra"


async def test_a_cron_expression_is_declared_non_empty_and_an_empty_one_is_refused(
    client: Client, document: dict[str, Any]
) -> None:
    expression = document["components"]["schemas"]["CronTrigger"]["properties"]["expression"]
    assert expression["minLength"] == 1
    answer = await client.post(
        "/triggers/preview", json={"trigger": {"kind": "cron", "expression": ""}}
    )
    assert answer.status_code == 422
    assert answer.json()["errors"][0]["field"] == "trigger.expression"
