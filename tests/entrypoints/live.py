"""A real `imbi-scheduler serve` in a subprocess, on a free loopback port."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0
STOP_TIMEOUT = 60.0


def cli_command() -> list[str]:
    """How to run `imbi-scheduler`: the console script when installed, else the module."""
    script = shutil.which("imbi-scheduler")
    return [script] if script else [sys.executable, "-m", "entrypoints.cli"]


def run_cli(*args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it: a process of its own, with only `environ`'s SCHEDULER_*
    variables."""
    return subprocess.run(
        [*cli_command(), *args],
        env=clean_environ(environ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def clean_environ(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without any SCHEDULER_* variable, plus `extra`."""
    environ = {key: value for key, value in os.environ.items() if not key.startswith("SCHEDULER_")}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environ.get("PYTHONPATH")]))
    environ.update(extra)
    return environ


class LiveServer:
    """`imbi-scheduler serve` with `environ` (SCHEDULER_* variables), on 127.0.0.1 unless
    SCHEDULER_HOST says otherwise; `prefix` goes before the command (`ip netns exec N`).
    As a context manager it waits until the server answers, unless `answering` is false
    (a server started before its database does not answer yet)."""

    def __init__(
        self,
        environ: Mapping[str, str],
        args: Sequence[str] = (),
        prefix: Sequence[str] = (),
        *,
        answering: bool = True,
    ) -> None:
        self._answering = answering
        self.port = free_port()
        self.url = f"http://{environ.get('SCHEDULER_HOST', '127.0.0.1')}:{self.port}"
        self._environ = clean_environ({"SCHEDULER_PORT": str(self.port), **environ})
        self._args = list(args)
        self._prefix = list(prefix)
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in __exit__
            prefix="imbi-scheduler-", suffix=".log", delete=False
        )
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *, answering: bool = True) -> LiveServer:
        """Start the process and, when `answering`, wait until it answers /healthz."""
        self.process = subprocess.Popen(
            [*self._prefix, *cli_command(), "serve", *self._args],
            env=self._environ,
            cwd=ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        if not answering:
            return self
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"the server exited with {self.process.returncode}:\n{self.log()}"
                )
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"the server did not answer within {START_TIMEOUT} s:\n{self.log()}")

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        """Send `sig` and wait for the process to exit; its exit code."""
        process = self.process
        if process is None:
            return 0
        if process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def log(self) -> str:
        return Path(self._log.name).read_text(errors="replace")

    def __enter__(self) -> LiveServer:
        return self.start(answering=self._answering)

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._log.close()
        Path(self._log.name).unlink(missing_ok=True)
