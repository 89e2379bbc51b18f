"""Start and stop what a process holds: the pool, the schema, the engine, the executor."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from entrypoints.container import Container
from entrypoints.database_wait import initialize_when_reachable

log = logging.getLogger("imbi_scheduler")


@asynccontextmanager
async def running(
    container: Container, *, engine: bool = True, stopping: asyncio.Event | None = None
) -> AsyncIterator[None]:
    """Hold the process's resources open: on PostgreSQL, open the pool and create or
    upgrade the schema; start the engine and the event sender when `engine`. On exit,
    stop the engine (it drains in-flight runs, manual runs included), then the event
    sender (its attempts in flight settle), then close the executor, the waker and the
    pool, in that order. A database not reachable yet is waited for up to
    SCHEDULER_DATABASE_WAIT (StoppedWhileWaiting when `stopping` is set meanwhile)."""
    settings = container.settings()
    scheduler_engine = container.engine()  # fails here on a misconfigured engine
    async with AsyncExitStack() as stack:
        if settings.store_kind == "postgres":
            schema = settings.db_schema
            url, wait = settings.database_url or "", settings.database_wait
            ran = await initialize_when_reachable(url, schema, wait, stopping)
            log.info("schema %s ready (%d statements run)", schema, len(ran))
            pool = container.pool()
            await pool.open(wait=True)
            stack.push_async_callback(pool.close)
        else:
            log.warning(
                "SCHEDULER_DATABASE_URL is not set: using the in-memory store; tasks and runs "
                "live in this process only and nothing persists across a restart"
            )
        stack.push_async_callback(container.waker().close)
        stack.push_async_callback(container.executor().close)
        # After the engine (its last outcomes raise events), before the executor closes.
        sender = container.event_sender()
        stack.push_async_callback(sender.stop)
        # Stopped also when not started: that drains manual runs (fire now).
        stack.push_async_callback(scheduler_engine.stop)
        if engine:
            await scheduler_engine.start()
            await sender.start()
        log.info(
            "scheduler running",
            extra={
                "replica": settings.replica,
                "store": settings.store_kind,
                "engine": settings.engine if engine else "off",
            },
        )
        yield
