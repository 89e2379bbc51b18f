"""A replica told to stop while its database is silent (frozen, or a proxy between them
that stopped forwarding, connections open) stops within its bound all the same
(docs/operations.md, "Shutdown"): nothing of a stop may wait on the database forever."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time

import httpx
import pytest

from bench.soak_proxy import FaultyProxy
from entrypoints.serving import STOP_GIVEN_UP, STOP_MARGIN
from tests.entrypoints.live import LiveServer
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

DRAIN = 2


def test_sigterm_ends_the_process_within_its_bound_while_the_database_is_silent(
    postgres_proxy: tuple[FaultyProxy, str], fresh_schema: str, recording_target: RecordingTarget
) -> None:
    faulty, url = postgres_proxy
    environ = {
        "SCHEDULER_DATABASE_URL": url,
        "SCHEDULER_SCHEMA": fresh_schema,
        "SCHEDULER_DRAIN_TIMEOUT": str(DRAIN),
        "SCHEDULER_MAX_POLL_INTERVAL": "0.5",  # a pass soon meets the silence
    }
    recording_target.respond("/slow", *[Response(delay=4)] * 50)
    with LiveServer(environ) as server:
        for i in range(5):  # runs in flight whose outcomes cannot be recorded
            slow = {
                "name": f"slow-{i}",
                "trigger": {"kind": "interval", "every": 1},
                "target": {"url": recording_target.url("/slow"), "timeout_seconds": 60},
                "max_running_instances": 5,
            }
            assert httpx.post(f"{server.url}/tasks", json=slow).status_code == 201
        wait_for(lambda: recording_target.received("/slow"), what="calls in flight")

        faulty.hold()  # from now on the database answers nothing, its connections open
        during = {**slow, "name": "during"}
        request = threading.Thread(  # an API request waiting on it
            target=_post, args=(f"{server.url}/tasks", during), daemon=True
        )
        request.start()
        time.sleep(2)  # the engine's next pass is stuck on a statement too
        assert server.process is not None
        began = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        try:
            code = server.process.wait(DRAIN + STOP_MARGIN + 20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {time.monotonic() - began:.0f} s after SIGTERM")
        finally:
            faulty.release()

        assert code in (0, STOP_GIVEN_UP), server.log()
        if code == STOP_GIVEN_UP:
            assert "stopping took longer than" in server.log()


def _post(url: str, body: dict[str, object]) -> None:
    # The server stops under it: what it answered is not the point.
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(url, json=body, timeout=120)
