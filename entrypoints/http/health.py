"""/healthz, /readyz and /metrics: open to probes and scrapers, no token needed."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from litestar import Response, get, head
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from prometheus_client import CONTENT_TYPE_LATEST

from application.claim_pass import FAILING_GRACE
from application.ports import Engine, TaskStore
from entrypoints.http.models import Health, Ready
from entrypoints.http.problems import PROBLEM_JSON, NotReady, Problem
from entrypoints.metrics import PrometheusObserver

PING_TIMEOUT = 2.0
# Litestar adds the charset itself.
METRICS_MEDIA_TYPE = CONTENT_TYPE_LATEST.split("; charset", 1)[0]


class StorePing:
    """The store's ping for /readyz, answered within PING_TIMEOUT whatever the store
    does. A ping that gets no answer is not cancelled (cancelling a statement sent to a
    database that has gone silent waits for the cancel request, which goes unanswered
    too, for seconds): it is left to end in the background, and the next probes wait on
    it rather than start another, so a silent database costs one connection, not one
    per probe."""

    def __init__(self, store: TaskStore) -> None:
        self._store = store
        self._pending: asyncio.Future[None] | None = None

    async def check(self) -> str:
        ping = self._pending
        if ping is None or ping.done():
            ping = self._pending = asyncio.ensure_future(self._store.ping())
            ping.add_done_callback(_retrieved)
        done, _ = await asyncio.wait({ping}, timeout=PING_TIMEOUT)
        if not done:
            return f"unavailable (no answer within {PING_TIMEOUT:g} s)"
        exc = ping.exception()
        return "ok" if exc is None else f"unavailable ({type(exc).__name__})"


def _retrieved(ping: asyncio.Future[None]) -> None:
    if not ping.cancelled():
        ping.exception()  # looked at, so never "exception was never retrieved"


@dataclass(frozen=True)
class Readiness:
    """What /readyz checks: the store answers, and this process's engine (when it runs
    one) is alive."""

    ping: StorePing
    engine: Engine | None

    async def checks(self) -> dict[str, str]:
        checks = {"store": await self.ping.check()}
        if self.engine is not None:
            checks["engine"] = _engine_check(self.engine)
        return checks


def _engine_check(engine: Engine) -> str:
    # Stalled first: a first pass that never ends leaves the engine not yet healthy.
    stalled = engine.stalled_for
    if stalled is not None:
        return f"stalled (its pass over the store has waited {stalled:.0f} s)"
    if engine.alive:
        return "ok"
    return (
        "not running (stopping, not through a first pass over the store yet, or its passes"
        f" have failed for {FAILING_GRACE:g} s)"
    )


@get(
    "/healthz",
    tags=["operations"],
    operation_id="getHealth",
    summary="The process is alive",
    description="200 while the process serves HTTP. Needs no token.",
)
async def healthz() -> Health:
    return Health(status="ok")


@get(
    "/readyz",
    tags=["operations"],
    operation_id="getReadiness",
    summary="The store is reachable and the trigger loop runs",
    description="200 when the store answers within 2 s and this process's engine (when it "
    "runs one) is alive; else 503 with `checks`. Needs no token.",
    responses={
        503: ResponseSpec(
            data_container=Problem,
            media_type=PROBLEM_JSON,
            description="Not ready; `checks` says what failed.",
            generate_examples=False,
        )
    },
)
async def readyz(readiness: NamedDependency[Readiness]) -> Ready:
    checks = await readiness.checks()
    if any(state != "ok" for state in checks.values()):
        raise NotReady(checks)
    return Ready(status="ready", checks=checks)


@get(
    "/metrics",
    tags=["operations"],
    operation_id="getMetrics",
    summary="Prometheus metrics (text exposition)",
    description="Every metric name starts with `scheduler_`. Needs no token.",
    media_type=METRICS_MEDIA_TYPE,
)
async def metrics(observer: NamedDependency[PrometheusObserver]) -> Response[bytes]:
    return Response(observer.exposition(), media_type=METRICS_MEDIA_TYPE)


# Load balancers probe with HEAD too: the status of GET, without its body. Left out of
# the OpenAPI document, which declares the GET.
@head("/healthz", include_in_schema=False)
async def healthz_head() -> None:
    return None


@head("/readyz", include_in_schema=False)
async def readyz_head(readiness: NamedDependency[Readiness]) -> Response[None]:
    checks = await readiness.checks()
    ready = all(state == "ok" for state in checks.values())
    return Response(None, status_code=200 if ready else 503)


HEALTH_HANDLERS = [healthz, readyz, metrics, healthz_head, readyz_head]
