"""`imbi-scheduler explain` and `imbi-scheduler backfill` against a real server (a
LiveServer on both stores), as a user runs them: processes of their own."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from entrypoints.cli import main
from tests.entrypoints.live import LiveServer, free_port, run_cli
from tests.entrypoints.test_end_to_end import store_environ as store_environ  # fixture
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually

ADMIN = "cli-admin-token"
VIEWER = "cli-viewer-token"


@pytest.fixture
def server(store_environ: dict[str, str]) -> Iterator[LiveServer]:
    tokens = f"{ADMIN},{VIEWER}:read"
    with LiveServer({**store_environ, "SCHEDULER_API_TOKENS": tokens}) as live:
        yield live


def add_daily_task(server: LiveServer, target: RecordingTarget) -> dict[str, object]:
    body = {
        "name": "daily-export",
        "trigger": {"kind": "cron", "expression": "30 7 * * *", "timezone": "UTC"},
        "target": {"url": target.url("/export")},
        "overlap": "buffer_all",
    }
    headers = {"Authorization": f"Bearer {ADMIN}"}
    response = httpx.post(f"{server.url}/tasks", json=body, headers=headers)
    assert response.status_code == 201, response.text
    task: dict[str, object] = response.json()
    return task


def last_occurrences(days: int) -> list[datetime]:
    now = datetime.now(UTC)
    latest = now.replace(hour=7, minute=30, second=0, microsecond=0)
    if latest > now:
        latest -= timedelta(days=1)
    return [latest - timedelta(days=k) for k in reversed(range(days))]


def url_of(server: LiveServer) -> list[str]:
    return ["--url", server.url]


def z(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_backfill_then_explain(server: LiveServer, recording_target: RecordingTarget) -> None:
    task = add_daily_task(server, recording_target)
    past = last_occurrences(2)
    span = ["--start", z(past[0]), "--end", z(past[-1])]

    dry = run_cli(
        "backfill", "daily-export", *span, "--dry-run", "--url", server.url, "--token", ADMIN
    )
    assert dry.returncode == 0, dry.stderr
    assert "would make 2 runs" in dry.stdout
    lines = dry.stdout.splitlines()[1:]
    assert [line.split()[0] for line in lines] == [z(instant) for instant in past]
    assert "backfill " not in dry.stdout and " run " not in dry.stdout  # no placeholder ids
    assert recording_target.received() == []

    # URL and token from the environment this time.
    done = run_cli(
        "backfill", "daily-export", *span, SCHEDULER_URL=server.url, SCHEDULER_TOKEN=ADMIN
    )
    assert done.returncode == 0, done.stderr
    assert "made 2 runs" in done.stdout
    assert "running" in done.stdout and "queued" in done.stdout

    async def both_called() -> bool:
        return len(recording_target.received("/export")) == 2

    await eventually(both_called, "both backfilled calls")
    keys = [call.header("Idempotency-Key") for call in recording_target.received("/export")]
    assert keys == [f"{task['id']}:{int(at.timestamp())}" for at in past]

    # A read-only token is enough to ask why. The task was created after the
    # occurrence, but the backfill ran it: its run stands for it (docs/api.md, "explain").
    result = run_cli(
        "explain", "daily-export", "--at", z(past[-1]), *url_of(server), "--token", VIEWER
    )
    assert result.returncode == 0, result.stderr
    verdict, detail = result.stdout.splitlines()[:2]
    assert verdict.startswith("ran: ")
    assert detail.startswith("ran: run ") and "(backfill " in detail


def test_exit_codes(server: LiveServer, recording_target: RecordingTarget) -> None:
    add_daily_task(server, recording_target)
    now = datetime.now(UTC)
    future = ["--start", z(now - timedelta(days=2)), "--end", z(now + timedelta(days=1))]
    url = ["--url", server.url]

    refused = run_cli("backfill", "daily-export", *future, *url, "--token", ADMIN)
    assert refused.returncode == 65, refused.stderr
    assert "--end" in refused.stderr

    unknown = run_cli("explain", "no-such-task", *url, "--token", ADMIN)
    assert unknown.returncode == 65, unknown.stderr
    assert "no-such-task" in unknown.stderr

    past = ["--start", z(now - timedelta(days=2)), "--end", z(now)]
    read_only = run_cli("backfill", "daily-export", *past, *url, "--token", VIEWER)
    assert read_only.returncode == 77, read_only.stderr
    no_token = run_cli("explain", "daily-export", *url)
    assert no_token.returncode == 77, no_token.stderr

    nobody = run_cli("explain", "daily-export", "--url", f"http://127.0.0.1:{free_port()}")
    assert nobody.returncode == 69, nobody.stderr

    naive = run_cli(
        "explain", "daily-export", "--at", "2026-01-01T00:00:00", *url, "--token", ADMIN
    )
    assert naive.returncode == 65 and "--at" in naive.stderr

    # A base URL with a path the API does not have reads as such, not as a task that
    # does not exist.
    prefixed = run_cli("explain", "daily-export", "--url", f"{server.url}/api", "--token", ADMIN)
    assert prefixed.returncode == 65, prefixed.stderr
    assert prefixed.stderr.startswith("imbi-scheduler: error: --url:"), prefixed.stderr
    assert "is --url right?" in prefixed.stderr


def test_a_token_keeps_no_line_end_and_a_bad_one_is_never_echoed(server: LiveServer) -> None:
    # A token read from a secret file keeps its last line end: it is the token still.
    url = ["--url", server.url]
    read = run_cli("explain", "no-such-task", *url, SCHEDULER_TOKEN=f" {ADMIN}\n")
    assert read.returncode == 65, read.stderr  # past the token: the task is unknown
    # One that no header can carry is bad configuration (78), its value not shown: the
    # error once quoted it whole, as a server that could not be reached (69).
    for token, where in ((f"{ADMIN} x", "--token"), ("tökén", "--token")):
        refused = run_cli("explain", "daily-export", *url, "--token", token)
        assert refused.returncode == 78, refused.stderr
        assert refused.stderr.startswith(f"imbi-scheduler: error: {where}:"), refused.stderr
        assert token not in refused.stderr and "Traceback" not in refused.stderr
    from_environ = run_cli("explain", "daily-export", *url, SCHEDULER_TOKEN="tö\tken")
    assert from_environ.returncode == 78 and "SCHEDULER_TOKEN" in from_environ.stderr


@pytest.mark.parametrize(
    "answer",
    [b"<html><body>Sign in</body></html>", b'{"echo": true}', b"[1, 2]"],
    ids=["html", "other-json", "a-list"],
)
def test_a_url_that_is_not_this_api_is_said_so_not_a_traceback(
    recording_target: RecordingTarget, answer: bytes
) -> None:
    # A login page or another service on the port answers 200 with what no command can
    # read: the server is unusable (69), and --url is what to check.
    recording_target.respond("/tasks/daily-export/explain", Response(200, answer))
    recording_target.respond("/tasks/daily-export/backfill", Response(200, answer))
    url = ["--url", recording_target.url("")]
    span = ["--start", "2026-01-01T00:00:00Z", "--end", "2026-01-02T00:00:00Z"]

    for args in (["explain", "daily-export"], ["backfill", "daily-export", *span]):
        result = run_cli(*args, *url)
        assert result.returncode == 69, result.stderr
        assert "is --url right?" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["explain", "backfill"])
def test_help_names_the_server_options(command: str) -> None:
    result = run_cli(command, "--help")
    assert result.returncode == 0, result.stderr
    for word in ("--url", "--token", "SCHEDULER_URL", "SCHEDULER_TOKEN"):
        assert word in result.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["explain", ""], "TASK"),
        (["explain", "  "], "TASK"),
        (
            ["backfill", "", "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-02T00:00:00Z"],
            "TASK",
        ),
        (["explain", "daily-export", "--url", "notaurl"], "--url"),
        (["explain", "daily-export", "--url", "ftp://127.0.0.1:8005"], "--url"),
        (["explain", "daily-export", "--url", "http://"], "--url"),
        (["explain", "daily-export", "--url", "http://127.0.0.1:port"], "--url"),
        # Read as "--url … is not found" once: no route has such a task.
        (["explain", "a/b"], "TASK"),
        (["explain", ".."], "TASK"),
        (
            ["backfill", "a/b", "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-02T00:00:00Z"],
            "TASK",
        ),
    ],
)
def test_an_empty_task_or_a_url_that_is_not_http_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    # Once a 65 ("no task with id or name 'explain'", from /tasks//explain) and a 69
    # ("cannot reach notaurl"): a usage error names the argument, and nothing is asked.
    with pytest.raises(SystemExit) as exit_info:
        main(args)

    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {words}" in err and "cannot reach" not in err


@pytest.mark.parametrize("where", ["--url", "SCHEDULER_URL"])
def test_a_url_with_a_password_is_refused_unshown(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A URL's user info would be sent as Basic auth in place of the token (the server
    then said "send a configured API token"), and its password was printed in every
    message naming the URL."""
    url = "http://ops:hunter2pw@127.0.0.1:1"
    if where == "--url":
        with pytest.raises(SystemExit) as exit_info:
            main(["explain", "daily-export", "--url", url, "--token", ADMIN])
        code = exit_info.value.code
    else:
        monkeypatch.setenv("SCHEDULER_URL", url)
        code = main(["explain", "daily-export", "--token", ADMIN])

    assert code == (2 if where == "--url" else 78)
    err = capsys.readouterr().err
    assert where in err and "user name or password" in err
    assert "hunter2pw" not in err and "cannot reach" not in err


def test_a_redirect_is_no_answer_of_this_api(recording_target: RecordingTarget) -> None:
    """Something before the server that redirects (http to https) is said as such,
    naming --url (it was "request: Moved Permanently")."""
    moved = Response(301, b"", headers={"Location": "https://127.0.0.1/tasks"})
    recording_target.respond("/tasks/daily-export/explain", moved)

    result = run_cli("explain", "daily-export", "--url", recording_target.url(""))

    assert result.returncode == 69, result.stderr
    assert "answered 301, a redirect to https://127.0.0.1/tasks" in result.stderr
    assert "is --url right?" in result.stderr


def test_a_scheduler_url_that_is_not_http_is_bad_configuration(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCHEDULER_URL", "127.0.0.1:8005")

    assert main(["explain", "daily-export"]) == 78
    assert "SCHEDULER_URL" in capsys.readouterr().err


def test_an_address_refused_for_unknown_tokens_is_told_to_come_back_later() -> None:
    # 429 is no bad input (65): the right token is refused for a while from this
    # address, so it is "unavailable, try later" (69), saying when.
    environ = {"SCHEDULER_API_TOKENS": ADMIN, "SCHEDULER_AUTH_FAILURE_LIMIT": "1"}
    with LiveServer(environ) as live:
        for guess in ("guess-1", "guess-2"):
            httpx.get(f"{live.url}/tasks", headers={"Authorization": f"Bearer {guess}"})

        refused = run_cli("explain", "daily-export", "--url", live.url, "--token", ADMIN)

    assert refused.returncode == 69, refused.stderr
    assert "answered 429" in refused.stderr
    assert "try again in" in refused.stderr
