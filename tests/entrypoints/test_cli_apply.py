"""`imbi-scheduler apply FILE` against a real server (a LiveServer on both stores), as a
deploy pipeline runs it: a process of its own, the file on disk or on standard input."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.entrypoints.live import ROOT, LiveServer, clean_environ, cli_command, run_cli
from tests.entrypoints.test_end_to_end import store_environ as store_environ  # fixture
from tests.fixtures.target import RecordingTarget

DEPLOYER = "cli-deployer-token"
VIEWER = "cli-viewer-token"


@pytest.fixture
def server(store_environ: dict[str, str]) -> Iterator[LiveServer]:
    tokens = f"deploy={DEPLOYER},{VIEWER}:read"
    environ = {
        **store_environ,
        "SCHEDULER_API_TOKENS": tokens,
        "SCHEDULER_TARGET_ALLOW": "127.0.0.1",
    }
    with LiveServer(environ) as live:
        yield live


def task(name: str, target: RecordingTarget, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "trigger": {"kind": "interval", "every": 3600},
        "target": {"url": target.url("/deploy")},
        "tags": ["reports"],
        **fields,
    }


def stored(server: LiveServer) -> dict[str, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {DEPLOYER}"}
    items = httpx.get(f"{server.url}/tasks", headers=headers).json()["items"]
    return {item["name"]: item for item in items}


def test_a_file_is_applied_after_its_dry_run_shows_the_diff(
    server: LiveServer, recording_target: RecordingTarget, tmp_path: Path
) -> None:
    auth = ["--url", server.url, "--token", DEPLOYER]
    listed = tmp_path / "tasks.json"
    listed.write_text(
        json.dumps([task("daily", recording_target), task("weekly", recording_target)])
    )
    assert run_cli("apply", str(listed), *auth).returncode == 0

    listed.write_text(json.dumps([task("daily", recording_target, description="the report")]))
    dry = run_cli("apply", str(listed), "--prune", "--selector-tag", "reports", "--dry-run", *auth)

    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        "would be updated: daily",
        '  description: null -> "the report"',
        "would be deleted: weekly",
        "unchanged: 0 tasks",
        "dry run: nothing written",
    ]
    assert set(stored(server)) == {"daily", "weekly"}

    applied = run_cli("apply", str(listed), "--prune", "--selector-tag", "reports", *auth)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines()[0] == "updated: daily"
    tasks = stored(server)
    assert set(tasks) == {"daily"} and tasks["daily"]["version"] == 2

    # Standard input, as a pipeline that renders its file pipes it.
    again = subprocess.run(
        [*cli_command(), "apply", "-", *auth],
        input=listed.read_text(),
        env=clean_environ({}),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == ["unchanged: 1 task"]


def test_what_the_apply_refuses_is_named_with_its_exit_code(
    server: LiveServer, recording_target: RecordingTarget, tmp_path: Path
) -> None:
    auth = ["--url", server.url, "--token", DEPLOYER]
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            [
                task("ok", recording_target),
                task("broken", recording_target, max_running_instances=0),
            ]
        )
    )
    refused = run_cli("apply", str(bad), *auth)
    assert refused.returncode == 65, refused.stderr
    assert "tasks[1].max_running_instances" in refused.stderr
    assert stored(server) == {}  # all or nothing

    broken = tmp_path / "broken.json"
    broken.write_text('[{"name": "x",\n  oops}]')
    not_json = run_cli("apply", str(broken), *auth)
    assert not_json.returncode == 65
    assert f"FILE: {broken} is not JSON: " in not_json.stderr
    assert "at line 2, column 3" in not_json.stderr
    huge = tmp_path / "huge.json"
    huge.write_text('[{"name": "x", "max_running_instances": ' + "9" * 5000 + "}]")
    too_long = run_cli("apply", str(huge), *auth)  # Python converts no such integer
    assert too_long.returncode == 65 and "Traceback" not in too_long.stderr
    assert "holds an integer of more than 4,300 digits" in too_long.stderr
    for spelled in ("NaN", "1e400"):  # Python reads them, httpx would not send them
        odd = tmp_path / "odd.json"
        odd.write_text('[{"name": "x", "trigger": {"kind": "interval", "every": ' + spelled + "}}]")
        refused_odd = run_cli("apply", str(odd), *auth)
        assert refused_odd.returncode == 65, refused_odd.stderr
        assert "is not JSON the API reads" in refused_odd.stderr
    twice = tmp_path / "twice.json"  # json.loads would keep the last and drop the first
    twice.write_text('[{"name": "x", "enabled": false, "enabled": true}]')
    repeated = run_cli("apply", str(twice), *auth)
    assert repeated.returncode == 65, repeated.stderr
    assert f"FILE: {twice} 0.enabled: given twice in one object" in repeated.stderr

    # What deletes or writes is said on the command line: a file holding `prune` (which
    # once deleted every task not listed without --prune) or `dry_run` is refused.
    for extra in ({"prune": True}, {"dry_run": True}, {"selector": {"tag": "reports"}}):
        holding = tmp_path / "holding.json"
        holding.write_text(json.dumps({"tasks": [], **extra}))
        refused_extra = run_cli("apply", str(holding), *auth)
        assert refused_extra.returncode == 65, refused_extra.stderr
        assert f"holds {next(iter(extra))} beside tasks" in refused_extra.stderr

    missing = run_cli("apply", str(tmp_path / "nowhere.json"), *auth)
    assert missing.returncode == 65 and "FILE:" in missing.stderr

    unpruned = run_cli("apply", str(bad), "--selector-tag", "reports", *auth)
    assert unpruned.returncode == 65 and "--selector-tag" in unpruned.stderr

    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps({"tasks": [task("ok", recording_target)]}))
    viewer = run_cli("apply", str(ok), "--url", server.url, "--token", VIEWER)
    assert viewer.returncode == 77, viewer.stderr
    assert stored(server) == {}
