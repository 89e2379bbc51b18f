"""The soak's replicas (a `serve` process and its successors after each kill) and the
scheduled tasks it creates, every one of them accounted for (`sched-…`)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.soak_target import SoakTarget
from tests.entrypoints.live import LiveServer


class Replica:
    """One `serve` process and its successors after each kill (a new pid, same name)."""

    def __init__(self, name: str, environ: dict[str, str]) -> None:
        self.name = name
        self._environ = {**environ, "SCHEDULER_REPLICA": name}
        self.server = LiveServer(self._environ)
        self.servers = [self.server]  # every process it has been, for their logs
        self.paused = False
        self.down = False
        self.rss_kb: list[int] = []

    def start(self) -> None:
        server = LiveServer(self._environ)
        self.servers.append(server)
        self.server = server.start()
        self.down = False

    def restart(self, tries: int = 5) -> None:
        """Start (at first, or again after a kill), trying again when a start fails:
        `serve` exits 69 while the database is out of reach (a restart or a blackhole
        under way), and a loaded machine can take longer than LiveServer waits."""
        for attempt in range(1, tries + 1):
            try:
                self.start()
                return
            except AssertionError:
                if attempt == tries:
                    raise
                time.sleep(2.0)

    def signal(self, sig: signal.Signals) -> None:
        assert self.server.process is not None
        self.server.process.send_signal(sig)

    def kill(self) -> None:
        self.server.stop(signal.SIGKILL)
        self.down = True

    def sample(self) -> None:
        process = self.server.process
        if process is None or self.down or process.poll() is not None:
            return
        try:
            status = Path(f"/proc/{process.pid}/status").read_text()
        except OSError:
            return
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                self.rss_kb.append(int(line.split()[1]))


def task_specs(target: SoakTarget, scale: int) -> list[dict[str, Any]]:
    """The scheduled tasks, all accounted for (`sched-…`): every trigger kind, every
    overlap and catch-up policy, retries, and `notify` events for the failing ones."""

    def spec(name: str, trigger: dict[str, Any], path: str, **extra: Any) -> dict[str, Any]:
        target_fields = {"url": target.url(path), "timeout_seconds": extra.pop("timeout", 3)}
        if "retry" in extra:
            target_fields["retry"] = extra.pop("retry")
        return {"name": f"sched-{name}", "trigger": trigger, "target": target_fields,
                "misfire_grace_seconds": 30, **extra}  # fmt: skip

    every = {"kind": "interval", "every": 1}
    every2 = {"kind": "interval", "every": 2}
    cron = {"kind": "cron", "expression": "* * * * * *"}
    notify = {"url": target.url("/events/failed"), "events": ["run.failed", "task.recovered"]}
    specs = []
    for k in range(scale):
        specs += [spec(f"ok-{k}-{i}", every, f"/ok/{k}-{i}") for i in range(8)]
        specs += [spec(f"tight-{k}-{i}", every, f"/ok/t{k}-{i}", misfire_grace_seconds=1)
                  for i in range(3)]  # fmt: skip
        specs += [spec(f"cron-{k}-{i}", cron, f"/ok/c{k}-{i}") for i in range(2)]
        specs += [spec(f"cron-tz-{k}", {**cron, "timezone": "America/New_York"}, f"/ok/z{k}")]
        specs += [spec(f"single-{k}-{i}", every, f"/slow/s{k}-{i}") for i in range(2)]
        specs += [spec(f"overlap-{k}-{i}", every, f"/slow/o{k}-{i}", max_running_instances=3)
                  for i in range(2)]  # fmt: skip
        specs += [spec(f"buffer-one-{k}", every, f"/slow/b{k}", overlap="buffer_one"),
                  spec(f"buffer-all-{k}", every2, f"/slow/B{k}", overlap="buffer_all")]  # fmt: skip
        specs += [spec(f"replace-{k}", every2, f"/hang/r{k}", overlap="replace", timeout=5)]
        specs += [spec(f"fail-{k}-{i}", every2, f"/fail/{k}-{i}", notify=notify, timeout=2,
                       retry={"max_attempts": 2, "backoff_seconds": 0.2,
                              "max_backoff_seconds": 0.5}) for i in range(2)]  # fmt: skip
        specs += [spec(f"hang-{k}-{i}", every2, f"/hang/{k}-{i}", timeout=1) for i in range(2)]
        specs += [spec(f"close-{k}-{i}", every, f"/close/{k}-{i}") for i in range(2)]
        specs += [spec(f"all-{k}-{i}", every, f"/ok/a{k}-{i}", catch_up="all")
                  for i in range(2)]  # fmt: skip
    return specs


def once_specs(target: SoakTarget, scale: int) -> list[dict[str, Any]]:
    """A one-shot and a daily calendar task per `scale`, each firing once a little after
    it is made (so they are made last, when the others are)."""
    soon = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=15)
    once = {"kind": "one_shot", "run_at": soon.replace(tzinfo=None).isoformat()}
    daily = {"kind": "calendar", "days": 1, "start_date": soon.date().isoformat(),
             "hour": soon.hour, "minute": soon.minute, "second": soon.second}  # fmt: skip

    def spec(name: str, trigger: dict[str, Any]) -> dict[str, Any]:
        return {"name": f"sched-{name}", "trigger": trigger, "misfire_grace_seconds": 30,
                "target": {"url": target.url(f"/ok/{name}"), "timeout_seconds": 3}}  # fmt: skip

    return [
        spec(f"{kind}-{k}", t)
        for k in range(scale)
        for kind, t in (("once", once), ("daily", daily))
    ]


def restart_postgres(cluster: str, port: int) -> None:
    """Restart the PostgreSQL cluster `cluster` ("15/soak"; "" for the first version's
    `main`, the one .ci/run starts) and wait until it accepts connections on `port`."""
    version, name = (sorted(os.listdir("/etc/postgresql"))[0], "main")
    if cluster:
        version, name = cluster.split("/")
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, name, "restart"],
        check=True,
        timeout=120,
    )
    subprocess.run(
        ["pg_isready", "-h", "127.0.0.1", "-p", str(port), "-t", "60"], check=True, timeout=90
    )
