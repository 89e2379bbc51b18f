"""Renders in worker processes: what a template that would take gigabytes or run on does
to its run and to this process (docs/api.md, "Templates"; docs/adr/0021-template-workers.md)."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.http import HttpExecutor
from adapters.http.template_worker import TemplateStrings
from adapters.http.template_workers import TemplateWorkers
from adapters.http.templates import TemplateFailed
from domain.errors import InvalidRequest
from domain.runs import RunStatus
from tests.adapters.http.builders import http_task, make_run
from tests.fixtures.target import RecordingTarget
from tests.fixtures.waiting import wait_for

# Each builds about a gigabyte in one operation the bounds of template_limits do not
# look at before it runs: its arguments are small, what it makes of them is not.
GIGABYTE_TEMPLATES = [
    pytest.param("{{ ('\\n' * 9999) | indent(99999, true, true) | length }}", id="indent"),
    pytest.param("{{ ('a ' * 99999) | wordwrap(1, true, 'x' * 9999) | length }}", id="wordwrap"),
    pytest.param(
        "{{ ('http://a.bc ' * 9999) | urlize(target='x' * 99999) | length }}", id="urlize"
    ),
]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _worker_pids(parent: int | None = None) -> set[int]:
    """The template workers of `parent` (this process), as the system lists them."""
    parent = os.getpid() if parent is None else parent
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if ppid == parent and b"template_worker" in cmdline:
            pids.add(int(entry.name))
    return pids


def _environment_of(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


@pytest.fixture
async def workers() -> AsyncIterator[TemplateWorkers]:
    made = TemplateWorkers(timeout=0.5)
    yield made
    await made.close()


@pytest.mark.parametrize("template", GIGABYTE_TEMPLATES)
async def test_a_render_that_would_take_gigabytes_fails_its_run_and_this_process_goes_on(
    executor: HttpExecutor, recording_target: RecordingTarget, template: str
) -> None:
    greedy = http_task(recording_target.url("/"), template=True, body={"x": template})
    before = _peak_rss_mb()

    outcome = await executor.execute(greedy, make_run(greedy), None)

    assert outcome.status is RunStatus.FAILED
    assert outcome.error == (
        "template target.body.x failed to render: it needed more memory than a render may use"
    )
    assert _peak_rss_mb() - before < 100  # the gigabyte was the worker's, refused
    assert recording_target.received() == []
    # The next templated run renders (the worker freed what it took, or was replaced).
    plain = http_task(recording_target.url("/{{ task.name }}"), template=True)
    assert (await executor.execute(plain, make_run(plain), None)).status is RunStatus.SUCCEEDED
    assert recording_target.received()[0].path == f"/{plain.name}"


async def test_a_render_past_its_time_is_stopped_and_its_worker_replaced(
    workers: TemplateWorkers,
) -> None:
    quick = TemplateStrings("http://h.test/{{ n }}")
    assert (await workers.render(quick, {"n": 1}))[0] == "http://h.test/1"
    [first] = _worker_pids()
    # No text made and few steps, but seconds of CPU: stopped at the 0.5 s given here,
    # before the worker's own 1 s bound of CPU.
    slow = TemplateStrings(
        "http://h.test/", body="{% for i in range(99999) %}{{ range(99999) | sum }}{% endfor %}"
    )

    with pytest.raises(TemplateFailed) as failed:
        await workers.render(slow, {})

    assert (failed.value.field, failed.value.detail) == (
        "target",
        "the render took more than 0.5 s and was stopped",
    )
    assert _worker_pids() == set()  # killed, and waited for
    assert (await workers.render(quick, {"n": 2}))[0] == "http://h.test/2"
    assert _worker_pids() - {first}


async def test_a_worker_that_dies_fails_its_render_and_is_replaced() -> None:
    workers = TemplateWorkers()
    try:
        quick = TemplateStrings("http://h.test/{{ n }}")
        await workers.render(quick, {"n": 1})
        [pid] = _worker_pids()
        # Seconds of CPU (its own bound stops it at 1 s): still rendering when killed.
        slow = TemplateStrings(
            "http://h.test/", body="{% for i in range(99999) %}{{ range(99999) | sum }}{% endfor %}"
        )
        rendering = asyncio.create_task(workers.render(slow, {}))
        await asyncio.sleep(0.1)  # whether it has read the request yet or not
        os.kill(pid, signal.SIGKILL)  # as the kernel's OOM killer would

        with pytest.raises(TemplateFailed) as failed:
            await rendering

        assert failed.value.detail == (
            "the process rendering it stopped (a render may use 256 MB of memory)"
        )
        assert (await workers.render(quick, {"n": 2}))[0] == "http://h.test/2"
    finally:
        await workers.close()


async def test_a_worker_is_given_none_of_the_schedulers_environment(
    workers: TemplateWorkers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCHEDULER_API_TOKENS", "ops=a-secret-token")
    await workers.render(TemplateStrings("http://h.test/"), {})

    [pid] = _worker_pids()
    environment = _environment_of(pid)
    assert b"a-secret-token" not in environment
    assert b"SCHEDULER_" not in environment


async def test_closing_the_executor_stops_its_workers(recording_target: RecordingTarget) -> None:
    executor = HttpExecutor(environ={})
    task = http_task(recording_target.url("/{{ task.name }}"), template=True)
    await executor.execute(task, make_run(task), None)
    assert _worker_pids()

    await executor.close()

    assert _worker_pids() == set()


SLOW = TemplateStrings(  # seconds of CPU, no text: the worker's 1 s bound of CPU stops it
    "http://h.test/", body="{% for i in range(99999) %}{{ range(99999) | sum }}{% endfor %}"
)


async def test_a_render_waits_a_bounded_time_for_a_free_worker() -> None:
    workers = TemplateWorkers(workers=1, wait=0.3)
    try:
        holding = asyncio.create_task(workers.render(SLOW, {}))
        await asyncio.sleep(0)  # it takes the only worker's turn

        with pytest.raises(TemplateFailed) as failed:
            await workers.render(TemplateStrings("http://h.test/"), {})

        assert failed.value.detail == "no template worker was free within 0.3 s"
        with pytest.raises(TemplateFailed, match="1 s of CPU"):
            await holding
    finally:
        await workers.close()


async def test_dry_runs_render_apart_from_scheduled_runs(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    task = http_task(recording_target.url("/{{ task.name }}"), template=True)
    await executor.execute(task, make_run(task), None)
    await executor.render(task, make_run(task), None, redact=True)  # both kinds started
    slow = task.model_copy(update={"target": task.target.model_copy(update={"body": SLOW.body})})
    # Two slow dry runs: as many as there are workers for runs.
    previewing = [
        asyncio.create_task(executor.render(slow, make_run(slow), None, redact=True))
        for _ in range(2)
    ]
    await asyncio.sleep(0)  # each has taken its turn, or waits for one

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.SUCCEEDED
    assert not any(p.done() for p in previewing)  # the run waited for neither
    for dry_run in previewing:
        with pytest.raises(InvalidRequest, match="1 s of CPU"):
            await dry_run


# A replica that renders one template in a worker, then starts one long render (a
# single `wordwrap` of a million characters: seconds of CPU, no step to stop it) and
# says so.
_REPLICA = """
import asyncio
from adapters.http.template_worker import TemplateStrings
from adapters.http.template_workers import TemplateWorkers

async def main():
    workers = TemplateWorkers(timeout=60)
    await workers.render(TemplateStrings("http://h.test/"), {})
    rendering = asyncio.create_task(workers.render(
        TemplateStrings("http://h.test/", body="{{ ('a' * 999999) | wordwrap(1) | length }}"), {}
    ))
    await asyncio.sleep(0.2)
    print("rendering", flush=True)
    await rendering

asyncio.run(main())
"""


def test_a_killed_replicas_worker_dies_with_it_mid_render() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", _REPLICA], stdout=subprocess.PIPE, cwd=Path(__file__).parents[3]
    ) as replica:
        try:
            assert replica.stdout is not None
            assert replica.stdout.readline() == b"rendering\n"
            [worker] = _worker_pids(replica.pid)
        finally:
            replica.kill()

    # Seconds of its render were left: it is gone well before, killed by the kernel.
    wait_for(lambda: not Path(f"/proc/{worker}").exists(), 3, "the worker to be gone")


async def test_a_targets_strings_render_to_a_million_characters_in_all(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    # Written out, each within the bound of one string: a body of 1.2 MB in all,
    # more than the API takes for a task (1 MiB) and than a dry run answers.
    body = {"first": "x" * 600_000, "second": "{{ 'y' }}" + "y" * 600_000}
    task = http_task(recording_target.url("/"), template=True, body=body)

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.error == (
        "template target.body.second failed to render: "
        "the target's strings render to more than 1000000 characters in all"
    )
    assert recording_target.received() == []


class _Garbling(TemplateWorkers):
    """Workers that answer what is not JSON: a worker a template had taken over, say."""

    started: list[asyncio.subprocess.Process]

    async def _start(self) -> asyncio.subprocess.Process:
        script = (
            "import sys; sys.stdin.buffer.read(4);"
            " sys.stdout.buffer.write(bytes([0, 0, 0, 3]) + b'{no'); sys.stdout.buffer.flush();"
            " sys.stdin.buffer.read()"
        )
        worker = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            script,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        self.started = [*getattr(self, "started", []), worker]
        return worker


async def test_an_answer_that_is_not_json_fails_the_render_and_stops_its_worker() -> None:
    workers = _Garbling()
    try:
        with pytest.raises(TemplateFailed) as failed:
            await workers.render(TemplateStrings("http://h.test/"), {})

        assert failed.value.detail.startswith("the process rendering it stopped")
        [worker] = workers.started
        assert worker.returncode is not None  # stopped, and waited for
    finally:
        await workers.close()
