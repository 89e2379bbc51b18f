"""Abuse of the API as a client would try it: targets that spell a denied address in
another way (docs/api.md, "The outbound guard"), token guessing (docs/api.md, "Access")."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.entrypoints.helpers import cron_task

Client = AsyncTestClient[Any]


@pytest.mark.parametrize(
    "url",
    [
        "http://0251.0376.0251.0376/latest/meta-data/",
        "http://2852039166/",
        "http://0xa9fea9fe/",
        "http://169.254.43518/",
        "http://[::ffff:169.254.169.254]/",
    ],
)
async def test_a_denied_address_in_any_spelling_is_refused_at_create(
    client: Client, url: str
) -> None:
    response = await client.post("/tasks", json=cron_task(url))

    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert [error["field"] for error in errors] == ["target.url"]
    assert "169.254.169.254" in errors[0]["message"]
    assert (await client.get("/tasks")).json()["items"] == []
