"""One attempt of a call as the executor saw it: reading its answer, how it ended, and
its log lines (a success at DEBUG, since the engine logs every run's outcome at INFO
already; anything else louder)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpx

from adapters.http.connections import Head
from adapters.http.failures import excerpt as excerpt_of
from adapters.http.failures import read_excerpt
from adapters.http.transport import Body
from domain.runs import Run
from domain.tasks import Task

logger = logging.getLogger("scheduler.http")


@dataclass(frozen=True, slots=True)
class CallResult:
    """How one call ended: an answer (`status`) or an error."""

    status: int | None = None
    excerpt: str | None = None
    error: str | None = None
    retryable: bool = False
    retry_after: float | None = None

    @property
    def succeeded(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


# An answer: status, reason phrase, Retry-After (if any) and the excerpt of the body.
Answer = tuple[int, str, str | None, str]


async def read_answer(
    exchanged: tuple[Head, Body],
    request: httpx.Request | None,
    limit: int,
    secrets: Iterable[str],
) -> Answer:
    """The answer of one exchange straight through the pool: what `AsyncClient.send`
    does for the executor's client (no cookies, auth or redirects to handle), without
    its layers (docs/adr/0010). A compressed answer's excerpt is decoded by httpx."""
    head, body = exchanged
    try:
        headers = head.headers
        if any(name.lower() == b"content-encoding" for name, _ in headers):
            response = httpx.Response(
                head.status_code, headers=headers, stream=body, request=request
            )
            excerpt = await read_excerpt(response.aiter_bytes(), limit, secrets)
        elif (arrived := body.arrived()) is not None:  # no need to iterate
            excerpt = excerpt_of(arrived, limit, secrets)
        else:
            excerpt = await read_excerpt(body, limit, secrets)
    finally:
        await body.aclose()
    retry_after = [value for name, value in headers if name.lower() == b"retry-after"]
    return (
        head.status_code,
        head.reason.decode("ascii", errors="ignore"),
        b", ".join(retry_after).decode("latin-1") if retry_after else None,
        excerpt,
    )


async def send_through_client(
    client: httpx.AsyncClient, request: httpx.Request, limit: int, secrets: Iterable[str]
) -> Answer:
    """The answer of `request` sent through `client`'s own layers (a URL with userinfo,
    which httpx turns into Basic auth)."""
    response = await client.send(request, stream=True)
    try:
        excerpt = await read_excerpt(response.aiter_bytes(), limit, secrets)
    finally:
        await response.aclose()
    retry_after = response.headers.get("Retry-After")
    return response.status_code, response.reason_phrase, retry_after, excerpt


def log_result(task: Task, run: Run, attempt: int, result: CallResult, seconds: float) -> None:
    level = logging.DEBUG if result.succeeded else logging.WARNING
    if not logger.isEnabledFor(level):
        return
    what = f"HTTP {result.status}" if result.status is not None else result.error
    logger.log(
        level,
        "task %s run %s attempt %d: %s in %.0f ms",
        task.id,
        run.id,
        attempt,
        what,
        seconds * 1000,
        extra=_fields(task, run, attempt, http_status=result.status, duration=seconds),
    )


def log_attempt(task: Task, run: Run, attempt: int, level: int, message: str, *args: Any) -> None:
    if not logger.isEnabledFor(level):
        return
    logger.log(
        level,
        "task %s run %s attempt %d: " + message,
        task.id,
        run.id,
        attempt,
        *args,
        extra=_fields(task, run, attempt),
    )


def _fields(task: Task, run: Run, attempt: int, **more: Any) -> dict[str, Any]:
    return {"task_id": str(task.id), "run_id": str(run.id), "attempt": attempt, **more}
