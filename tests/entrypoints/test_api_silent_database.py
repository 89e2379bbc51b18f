"""An API request already waiting on a database that then takes packets but answers
nothing (a frozen server, a pooler in front of one; its connections stay open) is
answered 503 once its connection has been out `SCHEDULER_DATABASE_ANSWER_TIMEOUT`,
not when the silence ends (docs/reliability.md, "A database that stops answering with
its connections open"); the replica serves again once the database answers."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable

import httpx
import psycopg
import pytest
from psycopg import sql

from adapters.postgres.pool import application_name
from bench.soak_proxy import FaultyProxy
from tests.entrypoints.live import LiveServer
from tests.fixtures.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ANSWER_LIMIT = 3  # seconds
SILENCE = 40  # seconds the database stays silent at most: far past the limit


def test_requests_waiting_when_the_database_falls_silent_are_answered_503_meanwhile(
    postgres_proxy: tuple[FaultyProxy, str], fresh_schema: str, database_url: str
) -> None:
    faulty, url = postgres_proxy
    environ = {
        "SCHEDULER_DATABASE_URL": url,
        "SCHEDULER_SCHEMA": fresh_schema,
        "SCHEDULER_DATABASE_ANSWER_TIMEOUT": str(ANSWER_LIMIT),
    }
    task = {
        "name": "kept",
        "trigger": {"kind": "cron", "expression": "0 3 * * *"},
        "target": {"url": "http://127.0.0.1:9/"},
    }
    # The API alone: the two waiting on the lock are the two requests.
    with LiveServer(environ, ["--no-engine"]) as server, psycopg.connect(database_url) as locker:
        assert httpx.post(f"{server.url}/tasks", json=task).status_code == 201
        answers: dict[str, tuple[int, str, float]] = {}
        requests: dict[str, Callable[[httpx.Client], httpx.Response]] = {
            "read": lambda client: client.get("/tasks/kept"),
            "write": lambda client: client.patch("/tasks/kept", json={"tags": ["silent"]}),
        }

        def ask(what: str) -> None:
            with httpx.Client(base_url=server.url, timeout=SILENCE + 30) as client:
                answer = requests[what](client)
            kind = answer.headers.get("content-type", "")
            answers[what] = (answer.status_code, kind, time.monotonic())

        # Both requests get their statements out and wait on a lock; then the database
        # falls silent, and the lock goes (what the server answers is lost on the way).
        tasks = sql.Identifier(fresh_schema, "tasks")
        locker.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(tasks))
        threads = [threading.Thread(target=ask, args=(what,)) for what in requests]
        for thread in threads:
            thread.start()
        wait_for(lambda: _waiting_on_a_lock(database_url, fresh_schema) == 2, what="waiters")
        faulty.hold()
        try:
            locker.rollback()
            deadline = time.monotonic() + SILENCE
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            released_at = time.monotonic()
        finally:
            faulty.release()
        for thread in threads:
            thread.join(SILENCE + 30)

        for what in requests:
            status, kind, at = answers[what]
            assert status == 503 and kind.startswith("application/problem+json"), what
            assert at < released_at, f"the {what} was answered only once the database was back"
        # Answering again (the write's 503 says its outcome is unknown: it had all been
        # sent, COMMIT too, when the database fell silent).
        wait_for(
            lambda: httpx.get(f"{server.url}/tasks/kept").status_code == 200,
            what="the task read again",
        )


def test_a_stop_answers_a_request_waiting_on_a_silent_database_503_within_its_grace(
    postgres_proxy: tuple[FaultyProxy, str], fresh_schema: str, database_url: str
) -> None:
    faulty, url = postgres_proxy
    # The default answer limit (30 s), longer than a stop gives requests in flight.
    environ = {"SCHEDULER_DATABASE_URL": url, "SCHEDULER_SCHEMA": fresh_schema}
    with LiveServer(environ, ["--no-engine"]) as server, psycopg.connect(database_url) as locker:
        answers: list[httpx.Response] = []

        def ask() -> None:
            with httpx.Client(base_url=server.url, timeout=SILENCE + 30) as client:
                answers.append(client.get("/tasks"))

        tasks = sql.Identifier(fresh_schema, "tasks")
        locker.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(tasks))
        asking = threading.Thread(target=ask)
        asking.start()
        wait_for(lambda: _waiting_on_a_lock(database_url, fresh_schema) == 1, what="a waiter")
        faulty.hold()
        try:
            locker.rollback()
            assert server.process is not None
            server.process.send_signal(signal.SIGTERM)
            asking.join(SILENCE)
        finally:
            faulty.release()
        asking.join(SILENCE)

        assert len(answers) == 1, "the request was not answered while the database was silent"
        assert answers[0].status_code == 503, answers[0].text  # not uvicorn's bare 500
        assert answers[0].headers["content-type"].startswith("application/problem+json")


def _waiting_on_a_lock(database_url: str, schema: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE application_name = %s AND wait_event_type = 'Lock'",
            (application_name(schema),),
        ).fetchone()
    return int(row[0]) if row else 0
