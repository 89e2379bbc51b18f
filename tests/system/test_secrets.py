"""No secret ever leaves the environment: not in an API answer, a log line at any level,
an error, a run row or any other row.

A real `serve` on PostgreSQL, logging at DEBUG, is given distinctive values for every kind
of secret (the signing secret, `headers_env` values, bearer, basic and OAuth2 client
secrets, and the OAuth2 token the token endpoint hands out). It runs tasks that succeed,
fail, time out and are dry-run, against a target that echoes every header it receives
back in its answer; the failures raise events, sent with secrets of their own to a
receiver that echoes them too (and refuses the first). Then every answer, the whole log
and a dump of every table are searched for each value.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql
from standardwebhooks.webhooks import Webhook

from tests.entrypoints.live import LiveServer
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import wait_for

pytestmark = [pytest.mark.postgres]

SIGNING_KEY = b"signing-key-Zq8vW3-distinctive!"
SIGNING_SECRET = "whsec_" + base64.b64encode(SIGNING_KEY).decode()
SECRETS = {
    "API_KEY": "apikey-Xq7Lm2Pw9Rt4",
    "TENANT_TOKEN": "tenant-Hh3Kd8Vn1Bc6",
    "BEARER": "bearer-Jw5Qs0Ye7Ua2",
    "PASSWORD": "password-Fg9Mz4Lc1Xp8",
    "CLIENT_SECRET": "client-Nb2Tr6Wq3Ds7",
}
OAUTH_TOKEN = "oauthtoken-Pk4Vx8Ja1Ge5"
ADMIN = "admin-token-for-the-secrets-test"


def searched_values() -> dict[str, str]:
    """Every form in which a secret could leak: as given, and as it goes on the wire."""
    values = {f"${name}": value for name, value in SECRETS.items()}
    values["signing secret"] = SIGNING_SECRET
    values["signing secret (base64)"] = SIGNING_SECRET.removeprefix("whsec_").rstrip("=")
    values["signing key"] = SIGNING_KEY.decode()
    values["basic credentials"] = base64.b64encode(f"u:{SECRETS['PASSWORD']}".encode()).decode()
    values["oauth2 client credentials"] = base64.b64encode(
        f"client-1:{SECRETS['CLIENT_SECRET']}".encode()
    ).decode()
    values["oauth2 token"] = OAUTH_TOKEN
    return values


def dump_tables(url: str, schema: str) -> str:
    """Every row of every table of `schema`, as text."""
    lines = []
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            [schema],
        ).fetchall()
        assert {"tasks", "runs"} <= {table for (table,) in tables}
        for (table,) in tables:
            query = sql.SQL("SELECT t::text FROM {}.{} AS t").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            lines += [f"{table}: {row}" for (row,) in conn.execute(query).fetchall()]
    return "\n".join(lines)


def task(name: str, target: RecordingTarget, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "trigger": {"kind": "cron", "expression": "0 3 1 1 *"},
        "target": {
            "url": target.url(f"/{name}"),
            "headers_env": {"X-Api-Key": "API_KEY", "X-Tenant": "TENANT_TOKEN"},
            "body": {"task": name},
            **fields,
        },
    }


def wait_finished(
    api: httpx.Client, run_ids: list[str], within: float = 30
) -> list[dict[str, Any]]:
    def finished() -> list[dict[str, Any]] | None:
        runs = [api.get(f"/runs/{run_id}").json() for run_id in run_ids]
        return runs if all(run["status"] != "running" for run in runs) else None

    return wait_for(finished, within, "the runs to finish", interval=0.1)


def wait_sent(api: httpx.Client, count: int, within: float = 60) -> list[dict[str, Any]]:
    def sent() -> list[dict[str, Any]] | None:
        events: list[dict[str, Any]] = api.get("/events", params={"status": "sent"}).json()["items"]
        return events if len(events) >= count else None

    return wait_for(sent, within, f"{count} events sent")


def test_no_secret_in_answers_logs_or_rows(
    database_url: str, schema: str, recording_target: RecordingTarget
) -> None:
    target = recording_target
    target.respond("/succeeds", Response(200, echo=True))
    target.respond("/fails", Response(500, echo=True))
    target.respond("/times-out", Response(200, delay=5, echo=True))
    target.respond("/oauth2", Response(401, echo=True), Response(200, echo=True))
    token = {"access_token": OAUTH_TOKEN, "token_type": "bearer", "expires_in": 3600}
    target.respond("/token", Response(200, json.dumps(token).encode()))
    # Events of the failed runs, sent with the secrets of their own notify: the first
    # attempt is refused (an answer echoing them, kept nowhere), every other is taken.
    target.respond("/events", Response(500, echo=True), Response(200, echo=True))
    notify = {
        "url": target.url("/events"),
        "auth": {"type": "bearer", "token_env": "BEARER"},
        "headers_env": {"X-Api-Key": "API_KEY"},
    }
    oauth2 = {
        "type": "oauth2_client_credentials",
        "token_url": target.url("/token"),
        "client_id": "client-1",
        "client_secret_env": "CLIENT_SECRET",
    }
    tasks = [
        task("succeeds", target, auth={"type": "bearer", "token_env": "BEARER"}),
        task("fails", target, auth={"type": "basic", "username": "u", "password_env": "PASSWORD"}),
        task("times-out", target, auth=oauth2, timeout_seconds=0.5),
        task("oauth2", target, auth=oauth2),
        task("unset", target, headers_env={"X-Api-Key": "NOT_SET_ANYWHERE"}),
    ]
    for body in tasks:
        body["notify"] = notify
    environ = {
        "SCHEDULER_DATABASE_URL": database_url,
        "SCHEDULER_SCHEMA": schema,
        "SCHEDULER_LOG_LEVEL": "DEBUG",
        "SCHEDULER_API_TOKENS": ADMIN,
        "SCHEDULER_SIGNING_SECRET": SIGNING_SECRET,
        **SECRETS,
    }
    answers: list[str] = []
    with (
        LiveServer(environ) as server,
        httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10
        ) as api,
    ):

        def call(method: str, path: str, **kwargs: Any) -> httpx.Response:
            response = api.request(method, path, **kwargs)
            answers.append(f"{method} {path} -> {response.status_code} {response.headers}")
            answers.append(response.text)
            return response

        for body in tasks:
            assert call("POST", "/tasks", json=body).status_code == 201
        for body in tasks:
            assert call("POST", f"/tasks/{body['name']}/dry-run").status_code == 200
        fired = [call("POST", f"/tasks/{body['name']}/runs").json()["id"] for body in tasks]
        runs = wait_finished(api, fired)
        events = wait_sent(api, 3)  # run.failed of fails, times-out and unset
        call("GET", "/events")
        for body in tasks:
            call("GET", f"/tasks/{body['name']}")
            call("GET", f"/tasks/{body['name']}/runs")
        call("GET", "/tasks")
        for run_id in fired:
            call("GET", f"/runs/{run_id}")
        call("GET", "/metrics")
        call("POST", "/tasks", json={**tasks[0], "name": "bad name!"})  # a 422
        log = server.log()
    rows = dump_tables(database_url, schema)

    # The scenario happened: the secrets were really sent, and each run ended as meant.
    statuses = [run["status"] for run in runs]
    assert statuses == ["succeeded", "failed", "failed", "succeeded", "failed"]
    assert "timed out" in runs[2]["error"]
    assert "NOT_SET_ANYWHERE" in runs[4]["error"]
    sent = target.received("/succeeds")[0]
    assert sent.header("X-Api-Key") == SECRETS["API_KEY"]
    assert sent.header("Authorization") == f"Bearer {SECRETS['BEARER']}"
    assert Webhook(SIGNING_SECRET).verify(sent.body, sent.headers) == {"task": "succeeds"}
    assert [r.header("Authorization") for r in target.received("/oauth2")] == [
        f"Bearer {OAUTH_TOKEN}"
    ] * 2
    assert runs[0]["response_excerpt"] and "***" in runs[0]["response_excerpt"]
    assert "DEBUG" in log
    assert sorted(event["attempts"] for event in events) == [1, 1, 2]
    delivered = target.received("/events")[-1]
    assert delivered.header("Authorization") == f"Bearer {SECRETS['BEARER']}"
    assert delivered.header("X-Api-Key") == SECRETS["API_KEY"]
    assert Webhook(SIGNING_SECRET).verify(delivered.body, delivered.headers)["type"] == (
        "run.failed"
    )

    haystacks = {"API answers": "\n".join(answers), "the log": log, "the tables": rows}
    leaks = [
        f"{what} in {where}"
        for what, value in searched_values().items()
        for where, text in haystacks.items()
        if value in text
    ]
    assert leaks == []
