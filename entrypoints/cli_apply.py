"""`imbi-scheduler apply FILE`: make a running server's tasks match a file, through
`POST /tasks/apply` (docs/api.md), for deploy pipelines that keep their tasks in files.

FILE (`-`: standard input) is JSON: a list of task specs, each with its name, or an
object with `tasks` and nothing else: `--prune`, `--selector-tag` and `--dry-run` are
said on the command line, where whoever reads the pipeline sees what it may delete
(a file holding `prune` or `dry_run` is refused). A dry run writes nothing and
prints what the apply would do, each updated task's changed fields old -> new. Server,
token and exit codes are those of `explain` and `backfill` (entrypoints/cli_api.py); a
FILE that cannot be read, or is not such JSON, is bad input (65) naming FILE.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from domain.errors import InvalidRequest
from entrypoints.cli_api import call_api, reading_answer, server_options
from entrypoints.http.sync import APPLY_MAX_BODY_BYTES
from entrypoints.json_text import read_json

# What a changed value may take on a line before it is cut (a body, a whole target).
SHOWN = 120
# The largest body POST /tasks/apply takes.
MAX_FILE_BYTES = APPLY_MAX_BODY_BYTES


def apply(args: argparse.Namespace) -> int:
    body = _body(args.file)
    if args.prune:
        body["prune"] = True
    if args.selector_tag is not None:
        if body.get("prune") is not True:
            raise InvalidRequest("--selector-tag", "picks the tasks --prune deletes: add --prune")
        body["selector"] = {"tag": args.selector_tag}
    body["dry_run"] = args.dry_run
    answer = call_api(args, "POST", "/tasks/apply", json=body)
    with reading_answer(args):
        _applied(answer, args.dry_run)
    return 0


def _body(path: str) -> dict[str, Any]:
    """The apply body FILE holds. Raises InvalidRequest naming FILE."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as file:
                text = file.read()
    except (OSError, UnicodeError) as exc:
        raise InvalidRequest("FILE", f"{path}: cannot be read ({exc})") from None
    if len(text.encode()) > MAX_FILE_BYTES:
        most = MAX_FILE_BYTES // 1024 // 1024
        raise InvalidRequest("FILE", f"{path} is larger than an apply takes ({most} MiB)")
    loaded = read_json(text, "FILE", path)
    if isinstance(loaded, list):
        return {"tasks": loaded}
    if isinstance(loaded, dict) and "tasks" in loaded:
        others = sorted(set(loaded) - {"tasks"})
        if others:
            # What deletes or writes is said on the command line, where whoever reads
            # the pipeline sees it; a file's own `prune` once deleted without --prune.
            raise InvalidRequest(
                "FILE",
                f"{path} holds {', '.join(others)} beside tasks: give --prune, "
                "--selector-tag and --dry-run on the command line instead",
            )
        return {"tasks": loaded["tasks"]}
    raise InvalidRequest("FILE", f"{path}: a list of task specs, or an object with `tasks`")


def _applied(answer: dict[str, Any], dry_run: bool) -> None:
    lead = "would be " if dry_run else ""
    changes = answer["changes"]
    for name in answer["created"]:
        print(f"{lead}created: {name}")
    for name in answer["updated"]:
        print(f"{lead}updated: {name}")
        for field, (old, new) in changes.get(name, {}).items():
            print(f"  {field}: {_shown(old)} -> {_shown(new)}")
    for name in answer["deleted"]:
        print(f"{lead}deleted: {name}")
    unchanged = len(answer["unchanged"])
    print(f"unchanged: {unchanged} task{'' if unchanged == 1 else 's'}")
    if dry_run:
        print("dry run: nothing written")


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


def add_command(commands: Any, formatter: type[argparse.HelpFormatter]) -> None:
    """Add `apply` to the CLI's subcommands."""
    deploy = commands.add_parser(
        "apply",
        help="make a running server's tasks match a file (asks a running server)",
        description="Send the tasks of FILE (JSON: a list of task specs with their names, "
        "or an object with `tasks`) to a running server's POST /tasks/apply, all or "
        "nothing: missing tasks are created, changed ones replaced, equal ones left at "
        "their version; with --prune, stored tasks the file does not list are deleted "
        "(only those tagged --selector-tag, when given). The server is --url or "
        "SCHEDULER_URL, the token --token or SCHEDULER_TOKEN.",
        formatter_class=formatter,
        epilog="example:\n  imbi-scheduler apply tasks.json --prune --selector-tag reports "
        "--dry-run",
    )
    deploy.add_argument("file", metavar="FILE", help="the JSON file ('-': standard input)")
    deploy.add_argument(
        "--prune", action="store_true", help="delete the stored tasks FILE does not list"
    )
    deploy.add_argument(
        "--selector-tag",
        metavar="TAG",
        type=_tag,
        help="with --prune, delete only tasks carrying TAG (others are left alone)",
    )
    deploy.add_argument(
        "--dry-run", action="store_true", help="show what would change, and write nothing"
    )
    server_options(deploy)
    deploy.set_defaults(command=apply, parser=deploy)


def _tag(value: str) -> str:
    # An empty tag from a template would prune every task not listed.
    if not value.strip():
        raise argparse.ArgumentTypeError("the tag must not be empty")
    return value
