"""README.md's commands, run as written against live servers.

Each shell block after the first (the install-and-test head, which `.ci/run` runs) is
marked with an HTML comment `<!-- test: SECTION MODE [port=N] -->`: `run` blocks must
exit 0, `background` blocks are started and must listen on port N. Only ports and the
database URL are changed, so that tests never collide with a real deployment.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from entrypoints.settings import Settings, env_name
from tests.entrypoints.live import ROOT, START_TIMEOUT, clean_environ, cli_command, free_port
from tests.fixtures.waiting import eventually

README = ROOT / "README.md"
MARKED_BLOCK = re.compile(
    r"(?:<!-- test: (?P<section>\w+) (?P<mode>run|background)(?: port=(?P<port>\d+))? -->\n)?"
    r"```sh\n(?P<body>.*?)```",
    re.DOTALL,
)
README_DATABASE = "postgresql://postgres@127.0.0.1:5432/scheduler"


@dataclass(frozen=True)
class Block:
    section: str | None
    mode: str | None
    port: int | None
    body: str


def readme_blocks() -> list[Block]:
    return [
        Block(m["section"], m["mode"], int(m["port"]) if m["port"] else None, m["body"])
        for m in MARKED_BLOCK.finditer(README.read_text())
    ]


def test_every_readme_command_after_the_head_is_marked_for_a_test() -> None:
    head, *rest = readme_blocks()

    assert "imbi-scheduler serve" in head.body and "pytest" in head.body
    assert rest and all(block.section in {"tour", "replicas"} for block in rest)


def test_the_configuration_table_names_every_setting() -> None:
    table = README.read_text().split("## Configuration", 1)[1].split("\n## ", 1)[0]

    missing = [env_name(field) for field in Settings.model_fields if env_name(field) not in table]

    assert missing == []


class Shell:
    """Runs README blocks with the README's ports (and database) mapped to test ones."""

    def __init__(self, replacements: dict[str, str], environ: dict[str, str]) -> None:
        self.replacements = replacements
        self.environ = clean_environ(environ)
        self.environ["PATH"] = os.pathsep.join([self._shim(), self.environ.get("PATH", "")])
        self.processes: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def _shim(self) -> str:
        """A directory holding `imbi-scheduler`, as `pip install .` would provide it."""
        folder = tempfile.mkdtemp(prefix="imbi-bin-")
        script = Path(folder, "imbi-scheduler")
        script.write_text(f'#!/bin/sh\nexec {shlex.join(cli_command())} "$@"\n')
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        return folder

    def text(self, body: str) -> str:
        for old, new in self.replacements.items():
            body = body.replace(old, new)
        return body

    def run(self, block: Block) -> str:
        # --fail-with-body: a 4xx or 5xx answer fails the block instead of passing quietly.
        script = 'curl() { command curl --fail-with-body "$@"; }\n' + self.text(block.body)
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            env=self.environ,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, f"{block.body}\n{result.stdout}\n{result.stderr}"
        return result.stdout

    def background(self, block: Block, port: int) -> Path:
        log = Path(tempfile.mkstemp(prefix="readme-", suffix=".log")[1])
        self.logs.append(log)
        with log.open("wb") as out:
            process = subprocess.Popen(
                # bash runs a single command in its own process (no fork): signals reach it.
                ["bash", "-c", self.text(block.body).strip()],
                env=self.environ,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.processes.append(process)
        deadline = time.monotonic() + START_TIMEOUT
        while not _listening(port):
            assert process.poll() is None, f"{block.body} exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"{block.body} is not listening on {port}"
            time.sleep(0.05)
        return log

    def stop(self) -> list[int]:
        codes = []
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                codes.append(process.wait(60))
            except subprocess.TimeoutExpired:
                process.kill()
                codes.append(process.wait())
        for log in self.logs:
            log.unlink(missing_ok=True)
        return codes


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def shell_ports() -> Iterator[dict[int, int]]:
    yield {8005: free_port(), 8006: free_port(), 9000: free_port()}


def make_shell(ports: dict[int, int], extra: dict[str, str] | None = None) -> Shell:
    replacements = {str(old): str(new) for old, new in ports.items()}
    replacements.update(extra or {})
    # A bare `imbi-scheduler serve` listens on the default port, 8005.
    return Shell(replacements, {"SCHEDULER_PORT": str(ports[8005])})


def run_section(shell: Shell, section: str, ports: dict[int, int]) -> dict[str, str]:
    outputs: dict[str, str] = {}
    for block in readme_blocks():
        if block.section != section:
            continue
        if block.mode == "background":
            assert block.port is not None
            outputs[block.body] = str(shell.background(block, ports[block.port]))
        else:
            outputs[block.body] = shell.run(block)
    return outputs


async def test_the_readme_tour_runs_as_written(shell_ports: dict[int, int]) -> None:
    shell = make_shell(shell_ports)
    try:
        outputs = run_section(shell, "tour", shell_ports)
        target_log = Path(next(out for body, out in outputs.items() if "http.server" in body))

        async def target_called() -> bool:
            return '"GET / HTTP/1.1" 200' in target_log.read_text()  # noqa: ASYNC240

        await eventually(target_called)
    finally:
        codes = shell.stop()

    assert codes[0] == 0  # the scheduler stopped cleanly on SIGTERM
    printed = "\n".join(outputs.values())
    assert '"name":"hello"' in printed and '"manual":true' in printed
    assert '"kind":"interval","every":10' in printed and '"enabled":false' in printed
    assert '"fire_times":["2026-03-07T07:30:00Z","2026-03-08T07:30:00Z"' in printed
    assert "2026-03-08 03:30:00 EDT" in printed  # the CLI preview, across the gap
    # The payroll run rolled back from Sunday 1 March, and re-planned by a calendar change.
    assert '"flags":["rolled"],"rolled_from":"2026-03-01"' in printed
    assert '"cause":"calendar"' in printed
    # The file applied after its dry run.
    assert "would be created: weekday-report\nunchanged: 0 tasks\ndry run" in printed
    assert "\ncreated: weekday-report" in printed


@pytest.mark.postgres
async def test_the_readme_replicas_share_one_database(
    shell_ports: dict[int, int], database_url: str
) -> None:
    shell = make_shell(shell_ports, {README_DATABASE: shlex.quote(database_url)})
    try:
        run_section(shell, "replicas", shell_ports)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{shell_ports[8006]}") as api:

            async def two_runs() -> list[dict[str, object]]:
                page = (await api.get("/tasks/tick/runs", params={"status": "succeeded"})).json()
                return page["items"] if len(page["items"]) >= 2 else []

            runs = await eventually(two_runs, within=15)
            await api.post("/tasks/tick/pause")
    finally:
        codes = shell.stop()

    assert codes == [0, 0]
    instants = [run["scheduled_for"] for run in runs]
    assert len(set(instants)) == len(instants)  # each occurrence claimed once
