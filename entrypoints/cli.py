"""`imbi-scheduler`: serve the API and the engine, initialize the schema, preview triggers;
`explain`, `backfill` (entrypoints/cli_api.py) and `apply` (entrypoints/cli_apply.py) ask
a running server."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence
from datetime import date, datetime, timezone
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import ValidationError

from adapters.ical import calendar_from_ics
from application.previews import preview_trigger as fire_times
from domain.calendars import Calendar
from domain.errors import InvalidRequest, SchedulerError, StoreUnavailable
from domain.validation import FieldError, field_errors
from entrypoints.cli_api import API_EXIT_CODES
from entrypoints.cli_api import add_commands as add_api_commands
from entrypoints.cli_apply import add_command as add_apply_command
from entrypoints.container import build_container
from entrypoints.database_wait import driver_reason, initialize_unless_stopped
from entrypoints.json_text import read_json
from entrypoints.logs import configure_logging
from entrypoints.runtime import log
from entrypoints.serving import ListenError, serve
from entrypoints.settings import ConfigurationError, load_settings


class UsageError(Exception):
    """The command line contradicts itself; answered like argparse's own errors."""


# sysexits(3) codes, chosen by the most specific class of the error.
EXIT_CODES: dict[type[BaseException], int] = {
    ConfigurationError: 78,  # EX_CONFIG
    InvalidRequest: 65,  # EX_DATAERR
    StoreUnavailable: 69,  # EX_UNAVAILABLE
    SchedulerError: 70,  # EX_SOFTWARE
    ListenError: 71,  # EX_OSERR
    OSError: 71,
    **API_EXIT_CODES,  # explain, backfill, apply: the server unreachable (69), token refused (77)
}
UNEXPECTED = 70

# What `preview` calls each trigger field, for error messages.
PREVIEW_OPTIONS = {
    "trigger.expression": "EXPR",
    "trigger.timezone": "--timezone",
    "trigger.every": "--every",
    "trigger.start_at": "--start-at",
    "trigger.end_at": "--end-at",
    "trigger.run_at": "--run-at",
    "trigger.start_date": "--start-date",
    "count": "--count",
    "after": "--after",
    "trigger.dst": "--dst",
    "trigger.dst.gap": "--dst gap",
    "trigger.dst.fold": "--dst fold",
    "trigger.calendar.policy": "--calendar-policy",
    "trigger.calendar.name": "--calendar",
    **{f"trigger.{unit}": f"--{unit}" for unit in ("years", "months", "weeks", "days")},
    **{f"trigger.{unit}": f"--{unit}" for unit in ("hour", "minute", "second")},
}


def exit_code(exc: BaseException) -> int:
    for cls in type(exc).__mro__:
        if cls in EXIT_CODES:
            return EXIT_CODES[cls]
    return UNEXPECTED


# -- init-db -----------------------------------------------------------------------------


def init_db(args: argparse.Namespace) -> int:
    settings = load_settings()
    configure_logging(settings.log_level, settings.log_format)
    if not settings.database_url:
        raise ConfigurationError(
            "SCHEDULER_DATABASE_URL is not set: init-db needs the PostgreSQL URL "
            "(e.g. postgresql://user@host:5432/dbname)"
        )
    statements = asyncio.run(
        initialize_unless_stopped(settings.database_url, settings.db_schema, settings.database_wait)
    )
    if statements is None:
        log.info("stopped before PostgreSQL could be reached: nothing was done")
    elif statements:
        print(f"schema {settings.db_schema}: {len(statements)} statements run")
    else:
        print(f"schema {settings.db_schema}: up to date")
    return 0


# -- preview -----------------------------------------------------------------------------


def preview(args: argparse.Namespace) -> int:
    trigger = preview_trigger(args)
    after = _instant(args.after, "--after") if args.after else None
    clock = build_container().clock()  # the one thing a preview needs: no settings read
    calendars = []
    if args.calendar:
        # An open-ended recurrence is read from the day the preview starts on.
        calendar = calendar_file(args.calendar, today=(after or clock.now()).date())
        calendars.append(calendar)
        trigger["calendar"] = {"name": calendar.name, "policy": args.calendar_policy}
    if args.dst:
        trigger["dst"] = dst_option(args.dst)
    try:
        _, listed = fire_times(trigger, args.count, after, calendars, clock)
    except InvalidRequest as exc:
        raise InvalidRequest.of(
            [FieldError(PREVIEW_OPTIONS.get(e.field, e.field), e.message) for e in exc.errors]
        ) from None
    zone = ZoneInfo(str(trigger.get("timezone", "UTC")))
    print(f"{'local (' + zone.key + ')':<36} {'UTC':<21} flags")
    for occurrence in listed.occurrences:
        local = occurrence.at.astimezone(zone)
        offset = local.isoformat()[19:] or "+00:00"
        flags = list(occurrence.flags)
        if occurrence.rolled_from is not None:
            flags[flags.index("rolled")] = f"rolled from {occurrence.rolled_from}"
        if occurrence.wall != local.replace(tzinfo=None):
            flags.append(f"named {occurrence.wall:%Y-%m-%d %H:%M:%S}")
        print(
            f"{local:%Y-%m-%d %H:%M:%S} {local.tzname():<6} ({offset})  "
            f"{_utc(occurrence.at):<21} {', '.join(flags)}".rstrip()
        )
    if len(listed.occurrences) < args.count:
        print("(no more fire times)")
    for omission in listed.omitted:
        calendar_name = f" ({omission.calendar})" if omission.calendar else ""
        # A merged wall time fires, once, as the fire time it rolled onto.
        said = "fired as another" if omission.reason == "merged" else "not fired"
        print(f"{said}: {omission.date} {omission.wall}  {omission.reason}{calendar_name}")
    if listed.omitted_truncated:
        print(f"(and more not fired: only the first {len(listed.omitted)} are told)")
    return 0


def dst_option(text: str) -> dict[str, str]:
    """`gap=skip,fold=both` as the trigger's `dst` object."""
    policy: dict[str, str] = {}
    for item in text.split(","):
        key, equals, value = item.strip().partition("=")
        if not equals or key not in ("gap", "fold") or key in policy:
            raise InvalidRequest("--dst", f"{text!r}: write gap=VALUE and/or fold=VALUE")
        policy[key] = value
    return policy


def calendar_file(path: str, *, today: date) -> Calendar:
    """A calendar from a JSON file (a calendar object; `name` defaults to the file's
    stem) or an iCalendar file (.ics, or text starting BEGIN:VCALENDAR) read on `today`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeError) as exc:
        raise InvalidRequest("--calendar", f"cannot read {path}: {exc}") from None
    name = Path(path).stem
    if path.lower().endswith((".ics", ".ical")) or text.lstrip().startswith("BEGIN:VCALENDAR"):
        return calendar_from_ics(name, text, field="--calendar", today=today)
    data = read_json(text, "--calendar", path)
    if not isinstance(data, dict):
        raise InvalidRequest("--calendar", "a JSON calendar is an object")
    try:
        return Calendar.model_validate({"name": name, **data})
    except ValidationError as exc:
        raise InvalidRequest.of(field_errors(exc, prefix="--calendar")) from None


def preview_trigger(args: argparse.Namespace) -> dict[str, Any]:
    """The trigger the options describe, as the API's JSON would give it."""
    calendar = {
        unit: getattr(args, unit)
        for unit in ("years", "months", "weeks", "days", "hour", "minute", "second", "start_date")
        if getattr(args, unit) is not None
    }
    kinds = {
        "cron": args.expression is not None,
        "interval": args.every is not None,
        "one_shot": args.run_at is not None,
        "calendar": any(unit in calendar for unit in ("years", "months", "weeks", "days")),
    }
    chosen = [kind for kind, given in kinds.items() if given]
    if len(chosen) != 1:
        raise UsageError(
            "give exactly one trigger: a cron EXPR, --every, --run-at, or calendar "
            "--years/--months/--weeks/--days"
        )
    trigger: dict[str, Any] = {"kind": chosen[0], "timezone": args.timezone}
    if chosen[0] == "cron":
        trigger["expression"] = args.expression
    elif chosen[0] == "interval":
        trigger["every"] = _number_or_text(args.every)
    elif chosen[0] == "one_shot":
        trigger["run_at"] = args.run_at
    else:
        trigger.update(calendar)
    if chosen[0] != "one_shot":
        bounds = {"start_at": args.start_at, "end_at": args.end_at}
        trigger.update({key: value for key, value in bounds.items() if value is not None})
    return trigger


def _number_or_text(value: str) -> int | float | str:
    """A number as a number (`-5`, `1e400`: refused as numbers, with words that say so),
    anything else as the ISO 8601 duration it may be."""
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def _instant(value: str, option: str) -> datetime:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidRequest(option, f"{value!r} is not an ISO 8601 date and time") from None


def _utc(instant: datetime) -> str:
    return instant.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the parser --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="imbi-scheduler",
        description="A self-hosted HTTP job scheduler: tasks with cron, interval, calendar "
        "or one-shot triggers call HTTP targets; any number of replicas share one "
        "PostgreSQL database. Settings come from SCHEDULER_* environment variables "
        "(see README.md).",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {package_version('imbi-scheduler')}"
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    formatter = argparse.RawDescriptionHelpFormatter

    run = commands.add_parser(
        "serve",
        help="run the HTTP API and the trigger engine",
        description="Run the HTTP API and the trigger engine in one process until SIGTERM, "
        "SIGINT or SIGHUP, then stop gracefully: finish requests in flight, let runs in flight "
        "finish (up to SCHEDULER_DRAIN_TIMEOUT seconds), close connections. On PostgreSQL "
        "the schema is created or upgraded at start. Without SCHEDULER_DATABASE_URL, tasks "
        "live in memory and nothing persists.",
        formatter_class=formatter,
        epilog="examples:\n  imbi-scheduler serve\n  SCHEDULER_DATABASE_URL=postgresql://"
        "postgres@127.0.0.1/scheduler SCHEDULER_API_TOKENS=ops=$(openssl rand -hex 32) \\\n"
        "    imbi-scheduler serve --host 0.0.0.0 --port 8005\n"
        "(the database must exist; off loopback, a token is required)",
    )
    run.add_argument("--host", help="listen on this address (overrides SCHEDULER_HOST)")
    run.add_argument("--port", type=int, help="listen on this port (overrides SCHEDULER_PORT)")
    role = run.add_mutually_exclusive_group()
    role.add_argument("--no-engine", action="store_true", help="serve the API only")
    role.add_argument(
        "--no-api",
        action="store_true",
        help="run the engine only: no API or console, only /healthz, /readyz and /metrics",
    )
    run.set_defaults(command=serve, parser=run)

    init = commands.add_parser(
        "init-db",
        help="create or upgrade the PostgreSQL schema",
        description="Create or upgrade the schema SCHEDULER_SCHEMA (default: scheduler) in "
        "the database SCHEDULER_DATABASE_URL names. Safe to run again and from several "
        "processes at once; `serve` does it at start too.",
    )
    init.set_defaults(command=init_db, parser=init)

    show = commands.add_parser(
        "preview",
        help="print a trigger's next fire times",
        description="Print the next fire times of a trigger, in its timezone and in UTC, "
        "without creating anything. Give exactly one trigger: a cron EXPR, --every, "
        "--run-at, or a calendar interval (--years/--months/--weeks/--days).",
        formatter_class=formatter,
        epilog="examples:\n"
        "  imbi-scheduler preview '30 2 * * *' --timezone America/New_York --count 5\n"
        "  imbi-scheduler preview --every PT15M --start-at 2026-01-01T00:00:00Z\n"
        "  imbi-scheduler preview --months 1 --hour 9 --start-date 2026-01-31 "
        "--timezone America/New_York\n"
        "  imbi-scheduler preview --run-at 2026-03-08T02:30:00 --timezone America/New_York\n"
        "  imbi-scheduler preview '0 9 1 * *' --calendar holidays.ics "
        "--calendar-policy previous_business_day\n"
        "  imbi-scheduler preview '30 1 * * *' --timezone America/New_York --dst fold=both",
    )
    show.add_argument("expression", nargs="?", metavar="EXPR", help="a cron expression")
    show.add_argument("--timezone", default="UTC", help="an IANA zone name (default: UTC)")
    show.add_argument("--count", type=int, default=5, help="how many fire times (1-100)")
    show.add_argument("--after", help="list fire times after this instant (default: now)")
    show.add_argument("--every", help="interval: seconds or an ISO 8601 duration (PT15M)")
    show.add_argument("--run-at", help="one-shot: the instant (naive = in --timezone)")
    for unit in ("years", "months", "weeks", "days"):
        show.add_argument(f"--{unit}", type=int, help=f"calendar interval: {unit} per step")
    for unit in ("hour", "minute", "second"):
        show.add_argument(f"--{unit}", type=int, help=f"calendar: the wall-clock {unit}")
    show.add_argument("--start-date", help="calendar: the first date (default: today)")
    show.add_argument("--start-at", help="cron, interval, calendar: no fire time before this")
    show.add_argument("--end-at", help="cron, interval, calendar: no fire time after this")
    show.add_argument(
        "--dst", help="cron, calendar, one-shot: the DST policy, e.g. gap=skip,fold=both"
    )
    show.add_argument(
        "--calendar", metavar="FILE", help="a calendar to try: JSON or iCalendar (.ics)"
    )
    show.add_argument(
        "--calendar-policy",
        default="exclude",
        choices=["exclude", "next_business_day", "previous_business_day"],
        help="what a fire time on a --calendar date does (default: exclude)",
    )
    show.set_defaults(command=preview, parser=show)
    add_api_commands(commands, formatter)
    add_apply_command(commands, formatter)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command: Callable[[argparse.Namespace], int] = args.command
    try:
        return command(args)
    except UsageError as exc:
        args.parser.error(str(exc))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        code = exit_code(exc)
        if code == UNEXPECTED and not isinstance(exc, SchedulerError):
            log.exception("unexpected error")
        print(f"imbi-scheduler: error: {exc}{_reason(exc)}", file=sys.stderr)
        return code
    return 0


def _reason(exc: BaseException) -> str:
    reason = driver_reason(exc)
    return f": {reason}" if reason else ""


if __name__ == "__main__":
    sys.exit(main())
