"""`imbi-scheduler explain` and `imbi-scheduler backfill`: commands that ask a running
server's API, so they work against any replica and need no access to its database.

The server is `--url` (or SCHEDULER_URL, default http://127.0.0.1:8005) and the bearer
token `--token` (or SCHEDULER_TOKEN; none by default). Exit codes are the other
commands' (docs/operations.md, "Exit codes"): 65 for what the API refused as bad input
(400, 404, 422), 69 when the server cannot be reached, fails (5xx) or asks to come back
later (429, too many unknown tokens from this address) or answers what is not this
API (a login page, a redirect: "is --url right?"), 77 when the token is missing or not
allowed (401, 403). An empty TASK or one that can be no task's id or name (`a/b`), or a
`--url` that is not `http(s)://host` (or holds a user name or password, never shown), is
a usage error (2), and a bad SCHEDULER_URL or a token no header can carry bad
configuration (78, neither's secret shown): neither reaches a server.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from domain.errors import InvalidRequest, SchedulerError
from domain.names import NAME_CHARACTERS, could_name_a_task, reads_as_id
from domain.validation import FieldError
from entrypoints.settings import ConfigurationError

DEFAULT_URL = "http://127.0.0.1:8005"
TIMEOUT = 30.0


class ServerUnavailable(SchedulerError):
    """The server could not be reached, answered with a 5xx, or asked to wait (429)."""


class AccessDenied(SchedulerError):
    """The server refused the token (401, 403)."""


# Added to the CLI's exit codes (entrypoints.cli.EXIT_CODES).
API_EXIT_CODES: dict[type[BaseException], int] = {ServerUnavailable: 69, AccessDenied: 77}


def explain(args: argparse.Namespace) -> int:
    params = {} if args.at is None else {"at": _instant(args.at, "--at")}
    path = f"/tasks/{quote(args.task, safe='')}/explain"
    answer = call_api(args, "GET", path, params=params)
    with reading_answer(args):
        _explained(answer)
    return 0


def _explained(answer: Any) -> None:
    occurrence = answer.get("occurrence") or "none"
    version = answer["task_version"]
    when = "the task did not exist yet" if version is None else f"task version {version}"
    print(f"{answer['verdict']}: occurrence {occurrence} ({when})")
    print(answer["detail"])
    for run in answer.get("runs", []):
        print(_run_line(run))


def backfill(args: argparse.Namespace) -> int:
    body = {
        "start": _instant(args.start, "--start"),
        "end": _instant(args.end, "--end"),
        "only_missing": not args.all,
        "overlap": args.overlap,
        "dry_run": args.dry_run,
    }
    path = f"/tasks/{quote(args.task, safe='')}/backfill"
    answer = call_api(args, "POST", path, json=body)
    with reading_answer(args):
        _backfilled(answer, args.dry_run)
    return 0


def _backfilled(answer: Any, dry_run: bool) -> None:
    if dry_run:  # its ids are placeholders that name nothing: not shown
        print(f"dry run: would make {answer['runs']} runs (nothing written)")
        for run in answer.get("items", []):
            print(f"  {run['scheduled_for']}  would be {run['status']}")
        return
    print(f"backfill {answer['backfill_id']}: made {answer['runs']} runs")
    for run in answer.get("items", []):
        print(_run_line(run))


def add_commands(commands: Any, formatter: type[argparse.HelpFormatter]) -> None:
    """Add `explain` and `backfill` to the CLI's subcommands."""
    why = commands.add_parser(
        "explain",
        help="say what became of a task's occurrence (asks a running server)",
        description="Ask a running server what became of the task's occurrence at or "
        "just before --at (default: now): its verdict, a sentence, and its runs. The "
        "server is --url or SCHEDULER_URL, the token --token or SCHEDULER_TOKEN.",
        formatter_class=formatter,
        epilog="example:\n  imbi-scheduler explain nightly-report --at 2026-03-08T07:30:00Z",
    )
    why.add_argument("task", metavar="TASK", type=_task, help="the task's name or id")
    why.add_argument("--at", help="an instant with an offset (default: now)")
    server_options(why)
    why.set_defaults(command=explain, parser=why)

    again = commands.add_parser(
        "backfill",
        help="run a past range of a task's occurrences again (asks a running server)",
        description="Ask a running server to make a run for each of the task's fire times "
        "in [--start, --end] (at most 1,000, none in the future, nor older than the run "
        "retention), each called with its "
        "occurrence's Idempotency-Key. Occurrences that already succeeded are left out "
        "unless --all. The server is --url or SCHEDULER_URL, the token --token or "
        "SCHEDULER_TOKEN.",
        formatter_class=formatter,
        epilog="example:\n  imbi-scheduler backfill nightly-report "
        "--start 2026-03-01T00:00:00Z --end 2026-03-08T00:00:00Z --dry-run",
    )
    again.add_argument("task", metavar="TASK", type=_task, help="the task's name or id")
    again.add_argument("--start", required=True, help="the range's first instant")
    again.add_argument("--end", required=True, help="the range's last instant (inclusive)")
    again.add_argument("--dry-run", action="store_true", help="show what would be made")
    again.add_argument("--all", action="store_true", help="also occurrences that already succeeded")
    again.add_argument(
        "--overlap",
        default="buffer_all",
        choices=["buffer_all", "allow_all"],
        help="buffer_all (default): wait for the task's slots in order; allow_all: all at once",
    )
    server_options(again)
    again.set_defaults(command=backfill, parser=again)


def server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        type=_server_url,
        help=f"the server's base URL (default: SCHEDULER_URL, else {DEFAULT_URL})",
    )
    parser.add_argument(
        "--token",
        help="a bearer token (default: SCHEDULER_TOKEN, which other users of the machine"
        " cannot read in the process list, as they can --token)",
    )


def _task(value: str) -> str:
    # An empty TASK would ask for `/tasks//explain`, another route; one with a `/` (or
    # only dots) no route at all, which read as a --url the API does not have.
    if not value.strip():
        raise argparse.ArgumentTypeError("the task's name or id must not be empty")
    if not reads_as_id(value) and not could_name_a_task(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is no task's id or name: a name holds only {NAME_CHARACTERS}"
        )
    return value


def _server_url(value: str) -> str:
    """`value` if it is an http(s)://host URL; so a typo is not reported as a server
    that cannot be reached."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  # raises ValueError for a port that is not a number
    except ValueError:
        parts = None
    if parts is not None and (parts.username or parts.password):
        # Never echoed: it holds a password. httpx would send it as Basic auth in place
        # of the bearer token.
        raise argparse.ArgumentTypeError(
            "holds a user name or password (not shown): the server is http(s)://host[:port],"
            " and the token goes in --token or SCHEDULER_TOKEN"
        )
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{value!r} is not an http:// or https:// URL")
    return value


def _base_url(args: argparse.Namespace) -> str:
    url = args.url
    if url is None:
        url = os.environ.get("SCHEDULER_URL") or DEFAULT_URL
        try:
            _server_url(url)
        except argparse.ArgumentTypeError as exc:
            raise ConfigurationError(f"SCHEDULER_URL: {exc}") from None
    return str(url).rstrip("/")


def _token(args: argparse.Namespace) -> str | None:
    """The bearer token, without the line end or spaces a secret file or a paste leaves
    around it. One that cannot be a header's value is refused without being echoed:
    an error quoting it would put it in a CI log."""
    where = "--token" if args.token else "SCHEDULER_TOKEN"
    token = (args.token or os.environ.get("SCHEDULER_TOKEN") or "").strip()
    if not token:
        return None
    if not token.isascii() or not token.isprintable() or any(ch.isspace() for ch in token):
        raise ConfigurationError(
            f"{where}: a token is printable ASCII without spaces, as the server's "
            "SCHEDULER_API_TOKENS are (its value is not shown)"
        )
    return token


@contextmanager
def reading_answer(args: argparse.Namespace) -> Iterator[None]:
    """Around reading a 2xx answer: one the command cannot read (JSON that is not this
    API's: another service on that port) is ServerUnavailable naming --url, rather than
    a traceback."""
    try:
        yield
    except (KeyError, TypeError, AttributeError, ValueError):
        raise ServerUnavailable(_not_ours(_base_url(args))) from None


def _not_ours(url: str) -> str:
    return f"{url} answered with something other than this scheduler's API: is --url right?"


def call_api(args: argparse.Namespace, method: str, path: str, **request: Any) -> Any:
    url = _base_url(args)
    token = _token(args)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.request(method, url + path, headers=headers, timeout=TIMEOUT, **request)
    except httpx.HTTPError as exc:
        raise ServerUnavailable(f"cannot reach {url}: {exc}") from None
    if response.is_success:
        try:
            return response.json()
        except ValueError:
            raise ServerUnavailable(_not_ours(url)) from None
    if response.is_redirect:  # not this API's answer: the API redirects nothing
        where = response.headers.get("Location", "elsewhere")
        raise ServerUnavailable(
            f"{url} answered {response.status_code}, a redirect to {where} (no command"
            " follows one): is --url right?"
        )
    problem = _problem(response)
    detail = problem.get("detail") or response.reason_phrase
    if response.status_code == 404 and detail == response.reason_phrase:
        # No such route (a task not found says which task): a base URL with a prefix
        # the API does not have, or another service.
        raise InvalidRequest("--url", f"{url}{path.split('?')[0]} is not found: {_not_ours(url)}")
    if response.status_code in (401, 403):
        raise AccessDenied(f"{response.status_code}: {detail}")
    if response.status_code >= 500:
        raise ServerUnavailable(f"{url} answered {response.status_code}: {detail}")
    if response.status_code == 429:  # this address is refused for a while: try later
        wait = response.headers.get("Retry-After")
        later = f" (try again in {wait} s)" if wait else ""
        raise ServerUnavailable(f"{url} answered 429: {detail}{later}")
    errors = problem.get("errors") or []
    if errors:
        raise InvalidRequest.of([FieldError(_option(e["field"]), e["message"]) for e in errors])
    raise InvalidRequest(
        getattr(args, "task", "request") if response.status_code == 404 else "request", detail
    )


def _problem(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _option(field: str) -> str:
    """An API field as the option that gave it (`start` -> `--start`)."""
    options = {"start": "--start", "end": "--end", "at": "--at", "overlap": "--overlap"}
    return options.get(field, field)


def _instant(value: str, option: str) -> str:
    try:
        instant = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidRequest(option, f"{value!r} is not an ISO 8601 date and time") from None
    if instant.tzinfo is None:
        raise InvalidRequest(option, f"{value!r} needs an offset (Z, +02:00, ...)")
    return instant.isoformat()


def _run_line(run: dict[str, Any]) -> str:
    error = f"  {run['error']}" if run.get("error") else ""
    return f"  run {run['id']}  {run['scheduled_for']}  {run['status']}{error}"
