"""A database that vanishes without a word (docs/reliability.md, "A database that
vanishes silently"): a real `serve` replica whose database connection dies while it
waits for an answer, with no reset ever reaching it (a host powered off, an address
moved by a failover), notices within seconds and fires again on a new connection,
instead of waiting out the operating system's two hours of TCP silence.

The replica runs in a network namespace of its own, joined to this one by a virtual
cable; it reaches PostgreSQL through a TCP proxy on this side of the cable. The
proxy first stops answering (the engine's next claim is sent, acknowledged and left
unanswered), then, with the cable unplugged, drops its connections (their resets are
lost on the way), and the cable is plugged back in: the replica's sockets now lead
nowhere, and only keepalive probes can tell it. Needs root and `ip` (as in CI);
skipped where a namespace cannot be made.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from bench.soak_proxy import FaultyProxy
from tests.entrypoints.live import LiveServer
from tests.fixtures.target import RecordingTarget
from tests.fixtures.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

TOKEN = "partition-test-token"
# Keepalives (adapters/postgres/liveness.py) end a dead connection in about 20 s; the
# engine then backs off up to a few seconds before its next pass. Two hours is what
# the operating system's defaults would take.
NOTICED_WITHIN = 45.0


@dataclass(frozen=True)
class Cable:
    """A network namespace joined to this one by a veth pair: `near` is this side's
    address, `far` the namespace's."""

    namespace: str
    device: str  # this side's end
    near: str
    far: str

    def unplug(self) -> None:
        _ip("link", "set", self.device, "down")

    def plug(self) -> None:
        _ip("link", "set", self.device, "up")


def _ip(*args: str, namespace: str | None = None) -> None:
    command = (
        ["ip", *args] if namespace is None else ["ip", "netns", "exec", namespace, "ip", *args]
    )
    subprocess.run(command, check=True, capture_output=True, timeout=10)


@pytest.fixture
def cable() -> Iterator[Cable]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and `ip` to make a network namespace")
    tag = f"{os.getpid() % 100_000}{random.randrange(100)}"
    subnet = f"10.{random.randrange(200, 250)}.{random.randrange(256)}"
    made = Cable(f"imbi-part-{tag}", f"ipt{tag}h", f"{subnet}.1", f"{subnet}.2")
    far_device = f"ipt{tag}n"
    try:
        _ip("netns", "add", made.namespace)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot make a network namespace here: {exc.stderr.decode().strip()}")
    try:
        _ip("link", "add", made.device, "type", "veth", "peer", "name", far_device)
        _ip("link", "set", far_device, "netns", made.namespace)
        _ip("addr", "add", f"{made.near}/30", "dev", made.device)
        _ip("addr", "add", f"{made.far}/30", "dev", far_device, namespace=made.namespace)
        _ip("link", "set", far_device, "up", namespace=made.namespace)
        _ip("link", "set", "lo", "up", namespace=made.namespace)
        made.plug()
        yield made
    finally:
        subprocess.run(["ip", "link", "del", made.device], capture_output=True, timeout=10)
        subprocess.run(["ip", "netns", "del", made.namespace], capture_output=True, timeout=10)


def test_a_replica_whose_database_vanished_silently_answers_fires_and_stops(
    cable: Cable, database_url: str, schema: str
) -> None:
    upstream = conninfo_to_dict(database_url)
    proxy = FaultyProxy(
        str(upstream.get("host") or "127.0.0.1"), int(upstream.get("port") or 5432), host=cable.near
    ).start()
    target = RecordingTarget(host=cable.near)
    target.start()
    environ = {
        "SCHEDULER_DATABASE_URL": make_conninfo(
            database_url, host=cable.near, port=str(proxy.port)
        ),
        "SCHEDULER_SCHEMA": schema,
        "SCHEDULER_HOST": cable.far,
        "SCHEDULER_API_TOKENS": TOKEN,
        "SCHEDULER_TARGET_ALLOW": cable.near,
        "SCHEDULER_MAX_POLL_INTERVAL": "1",
        "SCHEDULER_DRAIN_TIMEOUT": "2",
    }
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        with LiveServer(environ, prefix=["ip", "netns", "exec", cable.namespace]) as server:
            answer = httpx.post(
                f"{server.url}/tasks",
                headers=auth,
                json={
                    "name": "every-second",
                    "trigger": {"kind": "interval", "every": 1},
                    "target": {"url": target.url("/tick"), "timeout_seconds": 5},
                    "misfire_grace_seconds": 30,
                },
                timeout=10,
            )
            assert answer.status_code == 201, answer.text
            task_id = uuid.UUID(answer.json()["id"])
            wait_for(lambda: len(target.received("/tick")) >= 2, what="the first calls")
            # Reads at once grow the pool, so that the read below finds an idle
            # connection: a new one would wait unanswered at the proxy before sending
            # anything (a loaded machine, whose engine held the pool's connections,
            # once failed the test so).
            with ThreadPoolExecutor(6) as pool:
                warm = list(pool.map(lambda _: _timed_get(f"{server.url}/tasks", auth), range(6)))
            assert [status for status, _ in warm] == [200] * 6

            # The proxy stops answering; a request's read of the task goes out, is
            # acknowledged by this side's kernel, and waits for an answer.
            proxy.hold()
            with ThreadPoolExecutor(1) as pool:
                pending = pool.submit(_timed_get, f"{server.url}/tasks/{task_id}", auth)
                wait_for(
                    lambda: (
                        task_id.bytes in bytes(proxy.held)
                        or str(task_id).encode() in bytes(proxy.held)
                    ),
                    what="the read of the task sent to a database that does not answer",
                )
                # Its connections end while the cable is out: their resets never arrive.
                cable.unplug()
                proxy.release()
                cable.plug()
                vanished_at = time.monotonic()
                status, seconds = pending.result()
            # The dead connection is noticed, and the read tried again on a new one.
            assert status == 200, f"answered {status} after {seconds:.1f} s"
            assert seconds < NOTICED_WITHIN

            # A run claimed before the proxy stopped answering may still call after:
            # three calls are occurrences claimed on new connections.
            wait_for(
                lambda: (
                    len([r for r in target.received("/tick") if r.received_at > vanished_at]) >= 3
                ),
                within=NOTICED_WITHIN,
                what=f"calls after the database vanished; the replica's log:\n{server.log()}",
            )
            # Nor does a connection that leads nowhere hold up a clean stop.
            assert server.stop() == 0, server.log()
    finally:
        target.stop()
        proxy.stop()


def _timed_get(url: str, headers: dict[str, str]) -> tuple[int, float]:
    """The status of GET `url` and the seconds it took; 0 when no answer came at all."""
    began = time.monotonic()
    try:
        status = httpx.get(url, headers=headers, timeout=NOTICED_WITHIN * 2).status_code
    except httpx.TimeoutException:
        status = 0
    return status, time.monotonic() - began
