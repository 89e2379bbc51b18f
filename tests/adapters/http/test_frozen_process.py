"""A process stopped while its call was answered (SIGSTOP, a paused VM) reads the answer
when it is continued, past its time limit: the target answered in time, so the run
succeeded (docs/reliability.md, "The zombie rule"). On Linux a stopped process's
`epoll_wait` returns EINTR when continued, and Python then ends that poll with no event:
the timers ran a turn before the answer was seen. An audit stopped replicas for 6 s and
25 s: runs the target had answered in 1 s were written `failed`, and a task pausing after
one failure was paused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.target import RecordingTarget, Response

ROOT = Path(__file__).resolve().parents[3]


def call_in_a_child_stopped_meanwhile(
    target: RecordingTarget, timeout: int, stopped_for: float, *, warm: bool
) -> dict[str, object]:
    """Run tests/adapters/http/frozen_child.py calling `target`; once the target has the
    call, stop the child for `stopped_for` seconds; its outcome."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.adapters.http.frozen_child", target.url("/"), str(timeout)]
        + (["warm"] if warm else ["cold"]),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "calling"
        wanted = 2 if warm else 1
        given_up = time.monotonic() + 30
        while len(target.received()) < wanted:
            assert time.monotonic() < given_up, "the target never had the call"
            time.sleep(0.005)
        child.send_signal(signal.SIGSTOP)
        time.sleep(stopped_for)
        child.send_signal(signal.SIGCONT)
        out, _ = child.communicate(timeout=60)
    finally:
        child.kill()
        child.wait()
    answer: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return answer


@pytest.mark.parametrize("warm", [False, True], ids=["first-call", "kept-connection"])
# Continued long after the 1 s limit, and just after it: a limit that waited a second
# only after a stall of 0.5 s or more (an earlier fix) still lost the answer when the
# process was continued 0.1-0.45 s past its time (an outside audit: 15 of 15).
@pytest.mark.parametrize("stopped_for", [2.5, 1.2], ids=["long-past", "just-past"])
def test_an_answer_that_came_while_the_process_was_stopped_is_read(
    recording_target: RecordingTarget, warm: bool, stopped_for: float
) -> None:
    answered = Response(200, b"done", delay=0.2)  # while the child is stopped
    recording_target.respond("/", *([Response(), answered] if warm else [answered]))

    outcome = call_in_a_child_stopped_meanwhile(recording_target, 1, stopped_for, warm=warm)

    assert outcome == {"status": "succeeded", "error": None, "http_status": 200}


def test_a_call_still_unanswered_when_the_process_is_continued_is_stopped(
    recording_target: RecordingTarget,
) -> None:
    recording_target.respond("/", Response(200, b"late", delay=30))

    outcome = call_in_a_child_stopped_meanwhile(recording_target, 1, 2.5, warm=False)

    assert outcome == {"status": "failed", "error": "timed out after 1s", "http_status": None}
    recording_target.release()
