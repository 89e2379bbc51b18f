"""`serve` and `init-db` started before their database (docs/operations.md, "Starting before
the database"): they keep trying for SCHEDULER_DATABASE_WAIT seconds, saying why each
time, and start as soon as it answers."""

from __future__ import annotations

import signal
import subprocess
import tempfile
from collections.abc import Iterator

import httpx
import pytest

from bench.soak_proxy import FaultyProxy
from tests.entrypoints.live import LiveServer, clean_environ, cli_command, run_cli
from tests.fixtures.waiting import wait_for

pytestmark = pytest.mark.postgres

WAITING = "PostgreSQL cannot be reached yet"


@pytest.fixture
def closed_door(postgres_proxy: tuple[FaultyProxy, str]) -> tuple[FaultyProxy, str]:
    """A proxy to the test database that refuses connections until reopened, and the
    URL that goes through it."""
    postgres_proxy[0].refuse()
    return postgres_proxy


def ready(server: LiveServer) -> bool:
    try:
        return httpx.get(f"{server.url}/readyz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@pytest.fixture
def waiting_server(
    closed_door: tuple[FaultyProxy, str], fresh_schema: str
) -> Iterator[tuple[FaultyProxy, LiveServer]]:
    """`serve` started while the database refuses it, once it has said that it waits."""
    proxy, url = closed_door
    environ = {"SCHEDULER_DATABASE_URL": url, "SCHEDULER_SCHEMA": fresh_schema}
    with LiveServer(environ, answering=False) as server:
        wait_for(lambda: WAITING in server.log(), what="a word that it waits")
        yield proxy, server


def test_serve_started_before_its_database_starts_once_it_answers(
    waiting_server: tuple[FaultyProxy, LiveServer],
) -> None:
    proxy, server = waiting_server
    assert "Connection refused" in server.log()  # why, in libpq's words
    assert "Uvicorn running" not in server.log() and "listening" not in server.log()

    proxy.reopen()

    wait_for(lambda: ready(server), what="/readyz to answer 200")
    assert f"API listening on {server.url}" in server.log()
    assert httpx.get(f"{server.url}/tasks", timeout=5).json()["items"] == []
    assert server.stop() == 0


def test_serve_stopped_while_it_waits_exits_cleanly_having_started_nothing(
    waiting_server: tuple[FaultyProxy, LiveServer],
) -> None:
    _, server = waiting_server

    assert server.stop(signal.SIGTERM) == 0
    assert "stopped before PostgreSQL could be reached" in server.log()
    assert "Traceback" not in server.log()


def test_init_db_gives_up_when_the_wait_is_over_saying_why(
    closed_door: tuple[FaultyProxy, str], fresh_schema: str
) -> None:
    _, url = closed_door

    result = run_cli(
        "init-db",
        SCHEDULER_DATABASE_URL=url,
        SCHEDULER_SCHEMA=fresh_schema,
        SCHEDULER_DATABASE_WAIT="1",
    )

    assert result.returncode == 69, result.stderr
    assert WAITING in result.stderr  # it did try again
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("imbi-scheduler: error: the database is unavailable: ")
    assert "Connection refused" in last
    assert "Traceback" not in result.stderr


def test_init_db_stopped_while_it_waits_exits_cleanly_having_done_nothing(
    closed_door: tuple[FaultyProxy, str], fresh_schema: str
) -> None:
    _, url = closed_door
    environ = {
        "SCHEDULER_DATABASE_URL": url,
        "SCHEDULER_SCHEMA": fresh_schema,
        "SCHEDULER_DATABASE_WAIT": "60",
    }
    with tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(
            [*cli_command(), "init-db"],
            env=clean_environ(environ),
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
        )

        def said_it_waits() -> bool:
            err.seek(0)
            return WAITING in err.read()

        wait_for(said_it_waits, what="a word that it waits")
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=10)  # at once, not at the end of the 60 s
        err.seek(0)
        log = err.read()

    assert code == 0, log
    assert "stopped before PostgreSQL could be reached: nothing was done" in log
    assert "Traceback" not in log
