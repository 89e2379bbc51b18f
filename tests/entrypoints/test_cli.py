"""`imbi-scheduler`: preview output, --help, exit codes, init-db against PostgreSQL."""

from __future__ import annotations

import re
import socket
import subprocess
from typing import IO

import httpx
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from entrypoints import container as container_module
from entrypoints.cli import EXIT_CODES, main
from entrypoints.settings import ConfigurationError
from tests.adapters.apscheduler.support import require_apscheduler
from tests.entrypoints.live import (
    ROOT,
    LiveServer,
    clean_environ,
    cli_command,
    free_port,
    run_cli,
)

pytestmark = pytest.mark.usefixtures("no_scheduler_environment")


@pytest.mark.parametrize(
    "args",
    [["preview"], ["preview", "* * * * *", "--every", "60"], ["serve", "--no-api", "--no-engine"]],
    ids=["no-trigger", "two-triggers", "nothing-to-run"],
)
def test_a_contradictory_command_line_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(args)

    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize("command", [[], ["serve"], ["init-db"], ["preview"]])
def test_help_says_what_each_command_does(command: list[str]) -> None:
    result = run_cli(*command, "--help")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: imbi-scheduler")
    for word in {
        (): ["serve", "init-db", "preview"],
        ("serve",): ["--no-engine", "--no-api", "--host", "--port", "SIGTERM"],
        ("init-db",): ["SCHEDULER_DATABASE_URL"],
        ("preview",): ["EXPR", "--timezone", "--count", "--every", "--run-at", "--months"],
    }[tuple(command)]:
        assert word in result.stdout


def test_a_bad_setting_fails_at_start_naming_the_variable() -> None:
    result = run_cli("serve", SCHEDULER_PORT="eighty", SCHEDULER_LOG_FORMAT="xml")

    assert result.returncode == 78
    assert "SCHEDULER_PORT" in result.stderr and "SCHEDULER_LOG_FORMAT" in result.stderr
    assert result.stdout == ""


def test_a_secret_setting_is_named_but_never_echoed() -> None:
    result = run_cli("serve", SCHEDULER_API_TOKENS="good, bad token:read")

    assert result.returncode == 78
    assert "SCHEDULER_API_TOKENS" in result.stderr and "bad token" not in result.stderr


def test_a_bad_signing_secret_stops_the_process_naming_the_variable() -> None:
    result = run_cli("serve", SCHEDULER_SIGNING_SECRET="whsec_c2hvcnQ= hunter2-not-whsec")

    assert result.returncode == 78
    assert "SCHEDULER_SIGNING_SECRET" in result.stderr
    assert "hunter2" not in result.stderr and "c2hvcnQ" not in result.stderr


def test_serve_refuses_a_public_listener_without_tokens() -> None:
    result = run_cli("serve", "--host", "0.0.0.0")

    assert result.returncode == 78
    assert "SCHEDULER_API_TOKENS" in result.stderr
    assert "SCHEDULER_ALLOW_ANONYMOUS" in result.stderr


def test_a_public_listener_allowed_without_tokens_says_so_at_start() -> None:
    environ = {"SCHEDULER_HOST": "0.0.0.0", "SCHEDULER_ALLOW_ANONYMOUS": "true"}
    with LiveServer(environ) as server:
        log = server.log()

    assert "listening on 0.0.0.0 with no API token" in log


def test_a_port_in_use_exits_71_before_anything_starts() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = run_cli("serve", "--port", str(taken.getsockname()[1]))

    assert result.returncode == 71
    assert "could not listen on 127.0.0.1:" in result.stderr
    assert "engine started" not in result.stderr


def test_an_engine_adapter_that_is_not_installed_fails_at_start_clearly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SCHEDULER_ENGINE", "apscheduler")
    monkeypatch.setattr(container_module, "APSCHEDULER_MODULE", "adapters.no_such_engine")

    code = main(["serve", "--no-api"])

    err = capsys.readouterr().err
    assert code == EXIT_CODES[ConfigurationError] == 78
    assert "SCHEDULER_ENGINE=apscheduler" in err and "SCHEDULER_ENGINE=native" in err
    assert "its 'apscheduler' extra (pip install -e '.[apscheduler]'" in err
    assert "Traceback" not in err


def started(stderr: IO[str]) -> list[str]:
    """The lines `serve` logs up to "scheduler running": from then on it stops cleanly
    on SIGTERM (before, the signal may find no handler yet and kill it)."""
    lines: list[str] = []
    while not lines or "scheduler running" not in lines[-1]:
        line = stderr.readline()
        assert line, "".join(lines)  # it exited before it started
        lines.append(line)
    return lines


def test_the_apscheduler_engine_is_one_setting_away() -> None:
    require_apscheduler()  # skips outside CI only
    with subprocess.Popen(
        [*cli_command(), "serve", "--no-api"],
        env=clean_environ({"SCHEDULER_ENGINE": "apscheduler", "SCHEDULER_PORT": str(free_port())}),
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stderr is not None
        lines = started(process.stderr)
        process.terminate()
        rest = process.communicate(timeout=60)[1]

    assert process.returncode == 0, rest
    assert "engine=apscheduler" in "".join(lines) + rest


def test_serve_without_a_database_warns_that_nothing_persists() -> None:
    with subprocess.Popen(
        [*cli_command(), "serve", "--no-api"],
        env=clean_environ({"SCHEDULER_PORT": str(free_port())}),
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stderr is not None
        first = started(process.stderr)[0]
        process.terminate()
        rest = process.communicate(timeout=60)[1]

    assert "SCHEDULER_DATABASE_URL is not set" in first and "nothing persists" in first
    assert process.returncode == 0
    assert "stopped" in rest


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert re.fullmatch(r"imbi-scheduler \d+\.\d+\.\d+\S*\n", capsys.readouterr().out)


def test_init_db_needs_a_database_url(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init-db"]) == EXIT_CODES[ConfigurationError]

    assert "SCHEDULER_DATABASE_URL is not set" in capsys.readouterr().err


def test_init_db_against_an_unreachable_server_exits_69() -> None:
    result = run_cli(
        "init-db",
        SCHEDULER_DATABASE_URL="postgresql://nobody@127.0.0.1:1/none",
        SCHEDULER_DATABASE_WAIT="0",  # test_database_wait.py has the wait
    )

    assert result.returncode == 69, result.stderr
    assert "imbi-scheduler: error: the database is unavailable: " in result.stderr
    assert "port 1 failed" in result.stderr  # the driver's reason, on one line
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (
            "postgresql://app:s3cret-pw@db/jobs?keepalive=1",
            'invalid URI query parameter: "keepalive"',
        ),
        ("host=db password=s3cret-pw dbname='jobs", "unterminated quoted string"),
    ],
)
def test_a_database_url_libpq_cannot_read_is_a_settings_error_naming_why_and_no_password(
    url: str, reason: str
) -> None:
    result = run_cli("serve", SCHEDULER_DATABASE_URL=url)

    assert result.returncode == 78, result.stderr  # a settings error, before anything starts
    assert "invalid settings: SCHEDULER_DATABASE_URL: is not a connection string" in result.stderr
    assert reason in result.stderr
    assert "s3cret-pw" not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:s3cret@pw-tail@127.0.0.1:5432/jobs",  # libpq's host: "pw-tail@…"
        "postgresql://app:s3cret/pw-tail@127.0.0.1:5432/jobs",  # libpq's port: "s3cret"
        "postgresql://app:s3cret?pw-tail@127.0.0.1:5432/jobs",
    ],
)
@pytest.mark.parametrize("command", ["serve", "init-db"])
def test_a_password_with_an_unencoded_at_or_slash_is_refused_showing_none_of_it(
    url: str, command: str
) -> None:
    result = run_cli(command, SCHEDULER_DATABASE_URL=url, SCHEDULER_DATABASE_WAIT="0")

    assert result.returncode == 78, result.stderr
    assert "SCHEDULER_DATABASE_URL: holds an '@' that does not end its user info" in result.stderr
    assert "percent-encoded (%40, %2F, %3F, %23)" in result.stderr
    for piece in ("s3cret", "pw-tail"):
        assert piece not in result.stderr + result.stdout


@pytest.mark.postgres
def test_init_db_names_a_database_that_does_not_exist_and_no_password(database_url: str) -> None:
    missing = make_conninfo(database_url, dbname="no_such_scheduler_db", password="s3cret-pw")

    result = run_cli("init-db", SCHEDULER_DATABASE_URL=missing, SCHEDULER_DATABASE_WAIT="0")

    assert result.returncode == 69, result.stderr
    assert 'database "no_such_scheduler_db" does not exist' in result.stderr
    assert "s3cret-pw" not in result.stderr + result.stdout


@pytest.mark.postgres
def test_init_db_creates_the_schema_then_finds_it_up_to_date(
    database_url: str, fresh_schema: str
) -> None:
    environ = {"SCHEDULER_DATABASE_URL": database_url, "SCHEDULER_SCHEMA": fresh_schema}

    first = run_cli("init-db", **environ)
    second = run_cli("init-db", **environ)

    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"schema {fresh_schema}: ") and "statements run" in first.stdout
    assert second.returncode == 0 and second.stdout.strip() == f"schema {fresh_schema}: up to date"
    with psycopg.connect(database_url) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (fresh_schema,),
        ).fetchall()
    assert {name for (name,) in tables} >= {"tasks", "runs", "run_leases"}


@pytest.mark.parametrize(
    "url", ["http://169.254.169.254/latest/", "http://127.0.0.1:9/events"], ids=["metadata", "deny"]
)
def test_an_events_url_the_outbound_guard_denies_stops_serve_at_start(url: str) -> None:
    # Accepted, every event would wait in the outbox until it expired: a notify.url
    # the guard denies is a 422 when written, and this is its setting's twin.
    result = run_cli(
        "serve", SCHEDULER_EVENTS_URL=url, SCHEDULER_TARGET_DENY="127.0.0.0/8", SCHEDULER_PORT="0"
    )

    assert result.returncode == 78, result.stderr
    assert "invalid settings: SCHEDULER_EVENTS_URL: outbound guard denied" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_engine_only_replica_serves_its_probes_and_metrics_and_nothing_else() -> None:
    # Its lateness and runs are the metrics worth scraping; a probe needs somewhere to go.
    with LiveServer({}, args=["--no-api"]) as server:
        ready = httpx.get(f"{server.url}/readyz")
        metrics = httpx.get(f"{server.url}/metrics")
        tasks = httpx.get(f"{server.url}/tasks")
        console = httpx.get(f"{server.url}/ui/")
        schema = httpx.get(f"{server.url}/schema/openapi.json")
        log = server.log()

    assert ready.status_code == 200
    assert ready.json()["checks"] == {"store": "ok", "engine": "ok"}
    assert "scheduler_runs_total" in metrics.text
    assert (tasks.status_code, console.status_code, schema.status_code) == (404, 404, 404)
    assert f"/healthz, /readyz and /metrics listening on {server.url}" in log
