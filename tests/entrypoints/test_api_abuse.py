"""Abuse of the API as a client would try it: targets that spell a denied address in
another way (docs/api.md, "The outbound guard"), token guessing (docs/api.md, "Access")."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient

from entrypoints.container import build_container
from entrypoints.http.app import create_app
from entrypoints.http.auth import FailureLimiter
from tests.entrypoints.helpers import cron_task, make_settings
from tests.entrypoints.live import LiveServer

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


# -- token guessing (docs/api.md, "Access") ---------------------------------------------

TOKEN = "s3cret-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_limiter_counts_failures_per_address_in_a_sliding_window() -> None:
    clock = FakeClock()
    limiter = FailureLimiter(3, 60, clock=clock)
    for _ in range(2):
        limiter.failed("10.0.0.1")
        clock.now += 10
    assert limiter.retry_after("10.0.0.1") is None  # two of three
    limiter.failed("10.0.0.1")

    assert limiter.retry_after("10.0.0.1") == 40  # until the first failure is 60 s old
    assert limiter.retry_after("10.0.0.2") is None  # other addresses are not affected
    clock.now += 39.5
    assert limiter.retry_after("10.0.0.1") == 1
    clock.now += 1
    assert limiter.retry_after("10.0.0.1") is None
    limiter.failed("10.0.0.1")  # the window slid: the second and third still count
    assert limiter.retry_after("10.0.0.1") == 10


def test_a_limit_of_zero_never_refuses() -> None:
    limiter = FailureLimiter(0, 60)
    for _ in range(100):
        limiter.failed("10.0.0.1")
    assert limiter.retry_after("10.0.0.1") is None


async def test_repeated_401s_answer_429_with_retry_after_whatever_the_token() -> None:
    settings = make_settings(api_tokens=TOKEN, auth_failure_limit=3, auth_failure_window=120)
    app = create_app(build_container(settings), run_engine=False)
    async with AsyncTestClient(app=app) as client:
        for guess in ("a", "b", "c"):
            wrong = await client.get("/tasks", headers={"Authorization": f"Bearer {guess}"})
            assert wrong.status_code == 401

        refused = await client.get("/tasks", headers={"Authorization": f"Bearer {TOKEN}"})

        assert refused.status_code == 429, refused.text
        assert refused.json()["type"] == "urn:imbi-scheduler:problem:too-many-requests"
        assert 110 <= int(refused.headers["Retry-After"]) <= 120  # 120 s, less the guesses
        # Probes need no token and are never refused.
        assert (await client.get("/healthz")).status_code == 200


async def test_requests_without_a_token_guess_nothing_so_are_never_counted_nor_refused() -> None:
    settings = make_settings(api_tokens=TOKEN, auth_failure_limit=3, auth_failure_window=120)
    app = create_app(build_container(settings), run_engine=False)
    async with AsyncTestClient(app=app) as client:
        # A client that forgot its token (or a dashboard behind the same proxy) polls on.
        for headers in ({}, {"Authorization": "Bearer "}, {"Authorization": "Basic dTpw"}) * 4:
            missing = await client.get("/tasks", headers=headers)
            assert missing.status_code == 401, missing.text
            assert missing.headers["WWW-Authenticate"].startswith("Bearer")

        assert (await client.get("/tasks", headers=AUTH)).status_code == 200

        for guess in ("a", "b", "c"):
            wrong = await client.get("/tasks", headers={"Authorization": f"Bearer {guess}"})
            assert wrong.status_code == 401
        # Past the limit a token is refused, right or wrong; no token is still a 401.
        assert (await client.get("/tasks", headers=AUTH)).status_code == 429
        assert (await client.get("/tasks")).status_code == 401


def test_a_live_server_limits_one_address_and_serves_another() -> None:
    environ = {
        "SCHEDULER_API_TOKENS": TOKEN,
        "SCHEDULER_AUTH_FAILURE_LIMIT": "5",
        "SCHEDULER_AUTH_FAILURE_WINDOW": "300",
    }
    with LiveServer(environ, ["--no-engine"]) as server:
        # 127.0.0.2 is another client address on the loopback network.
        guesser = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"))
        other = httpx.Client()
        with guesser, other:
            url = f"{server.url}/tasks"
            answers = [
                guesser.get(url, headers={"Authorization": f"Bearer guess-{n}"}).status_code
                for n in range(8)
            ]
            right = guesser.get(url, headers={"Authorization": f"Bearer {TOKEN}"})

            assert answers == [401] * 5 + [429] * 3
            assert right.status_code == 429 and int(right.headers["Retry-After"]) > 0
            # The other address is neither refused nor slowed down.
            assert other.get(url, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
            assert other.get(url, headers={"Authorization": "Bearer nope"}).status_code == 401
