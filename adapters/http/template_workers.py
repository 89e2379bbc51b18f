"""Target templates rendered in worker processes (docs/adr/0021-template-workers.md).

A render runs what a task's writer wrote (a dry run, which a read-only token may ask
for, renders too). `template_limits` bounds the operations it knows, but not every
operation: in a process of its own, a render that would build gigabytes meets that
process's memory limit, and one that runs too long is killed at `timeout` seconds,
while this process's event loop goes on claiming, calling and answering.

Workers start on the first render (a deployment without templates starts none) and
serve render after render; one that was stopped is replaced at the next render. A
worker is a fresh interpreter (`adapters.http.template_worker.main`) given none of
this process's environment but what Python needs: the scheduler's secrets are not in
its own (it runs as the same user, so the sandbox stays the boundary: ADR 0021).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from adapters.http import template_worker
from adapters.http.template_limits import MAX_RENDERED_CHARS
from adapters.http.template_worker import FRAME, SPENT, dump, load
from adapters.http.templates import TargetStrings, TemplateFailed

log = logging.getLogger(__name__)

WORKERS = 2  # renders at once; the others wait for a worker
TIMEOUT_SECONDS = 5.0  # of wall time, from the request sent to the answer read
WAIT_SECONDS = 30.0  # for a worker to be free, when others hold them all
START_SECONDS = 30.0  # for a worker to start (its imports, on a busy machine)
MEMORY_BYTES = 256 * 1024 * 1024  # of address space a worker may map beyond its own
# An answer's length: a target's strings render to MAX_RENDERED_CHARS in all, each
# character at most 6 bytes of JSON (a control character's escape). A longer one is
# refused before it is read: the replica never holds more of a worker's making.
MAX_ANSWER_BYTES = 6 * MAX_RENDERED_CHARS + 1024 * 1024

# The directory that holds this project's packages, for a worker's imports.
_ROOT = str(Path(__file__).resolve().parents[2])
_KEPT_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "TZ")


def _environment() -> dict[str, str]:
    kept = {name: os.environ[name] for name in _KEPT_ENVIRONMENT if name in os.environ}
    return kept | {"PYTHONPATH": _ROOT, "PYTHONDONTWRITEBYTECODE": "1"}


class TemplateWorkers:
    """At most `workers` renders at once, each in a worker process."""

    def __init__(
        self,
        workers: int = WORKERS,
        timeout: float = TIMEOUT_SECONDS,
        memory_bytes: int = MEMORY_BYTES,
        wait: float = WAIT_SECONDS,
    ) -> None:
        self._timeout = timeout
        self._wait = wait
        self._memory = memory_bytes
        self._turns = asyncio.Semaphore(workers)
        self._idle: list[asyncio.subprocess.Process] = []
        self._closed = False

    async def render(
        self, target: TargetStrings, context: dict[str, Any]
    ) -> tuple[str, dict[str, str], JsonValue]:
        """The url, headers and body of `target` rendered. Raises TemplateFailed."""
        strings = {"url": target.url, "headers": dict(target.headers), "body": target.body}
        request = dump({"target": strings, "context": context})
        try:
            async with asyncio.timeout(self._wait):
                await self._turns.acquire()
        except TimeoutError:
            raise TemplateFailed(
                "target", f"no template worker was free within {self._wait:g} s"
            ) from None
        try:
            answer = await self._render(request)
        finally:
            self._turns.release()
        if "failed" in answer:
            raise TemplateFailed(*answer["failed"])
        url, headers, body = answer["rendered"]
        return url, headers, body

    async def _render(self, request: bytes) -> dict[str, Any]:
        """The answer of an idle worker, or of one started for it."""
        if self._closed:
            raise TemplateFailed("target", "the scheduler is stopping")
        worker = self._idle.pop() if self._idle else None
        answer: dict[str, Any] = {SPENT: True}
        try:
            if worker is None:
                worker = await self._start()
            async with asyncio.timeout(self._timeout):
                answer = await self._exchange(worker, request)
        except TimeoutError:
            log.warning("a template render passed %g s: its worker was stopped", self._timeout)
            raise TemplateFailed(
                "target", f"the render took more than {self._timeout:g} s and was stopped"
            ) from None
        except _Oversized:
            raise TemplateFailed(
                "target", f"its result came to more than {MAX_ANSWER_BYTES // 2**20} MB"
            ) from None
        # It died, never began, or answered what is not an answer (ValueError: the JSON).
        except (EOFError, OSError, ValueError):  # asyncio.IncompleteReadError is an EOFError
            log.warning("a template worker stopped during a render; another will replace it")
            raise TemplateFailed(
                "target",
                "the process rendering it stopped (a render may use "
                f"{self._memory // 2**20} MB of memory)",
            ) from None
        finally:
            if worker is not None:
                if answer.get(SPENT) or self._closed:
                    await _stop(worker)
                else:
                    self._idle.append(worker)
        return answer

    async def _start(self) -> asyncio.subprocess.Process:
        worker = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            f"from {template_worker.__name__} import main; main()",
            str(self._memory),
            str(os.getpid()),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            # Not the replica's log: a worker that runs out of memory while answering
            # would write its traceback there, a line a read-only token could repeat.
            stderr=asyncio.subprocess.DEVNULL,
            env=_environment(),
        )
        try:
            assert worker.stdout is not None
            async with asyncio.timeout(START_SECONDS):
                ready = await worker.stdout.readexactly(FRAME.size)
            if FRAME.unpack(ready) != (0,):
                raise EOFError("not a template worker's first answer")
        except BaseException as exc:
            await _stop(worker)
            if isinstance(exc, TimeoutError):
                raise TemplateFailed(
                    "target", f"no template worker started within {START_SECONDS:g} s"
                ) from None
            if isinstance(exc, EOFError):  # asyncio.IncompleteReadError is one
                log.error("a template worker did not start (exit code %s)", worker.returncode)
            raise
        return worker

    async def _exchange(self, worker: asyncio.subprocess.Process, request: bytes) -> dict[str, Any]:
        assert worker.stdin is not None and worker.stdout is not None
        worker.stdin.write(FRAME.pack(len(request)) + request)
        await worker.stdin.drain()
        (size,) = FRAME.unpack(await worker.stdout.readexactly(FRAME.size))
        if size > MAX_ANSWER_BYTES:
            raise _Oversized  # not read: the worker is stopped
        answer: dict[str, Any] = load(await worker.stdout.readexactly(size))
        return answer

    async def close(self) -> None:
        """Stop the idle workers; one rendering now is stopped when its render ends."""
        self._closed = True
        idle, self._idle = self._idle, []
        for worker in idle:
            await _stop(worker)


class _Oversized(Exception):
    """A worker announced an answer longer than MAX_ANSWER_BYTES."""


async def _stop(worker: asyncio.subprocess.Process) -> None:
    if worker.returncode is None:
        worker.kill()
    await worker.wait()
