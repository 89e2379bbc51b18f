"""Waiting at start for PostgreSQL to come up (`SCHEDULER_DATABASE_WAIT`).

A replica started beside its database (a compose file, a host booting, a failover) often
starts first: rather than exit at once and leave the restart to a supervisor's backoff,
`serve` and `init-db` keep trying for a while, saying each time why, and exit 69 only
once the wait is over. Whatever the reason: libpq does not say which failures are for
good (a database that does not exist is told apart from a server starting up only by
the words of its message), and the reason is in the first warning, for an operator to
read and stop the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from adapters.postgres import initialize
from domain.errors import StoreUnavailable

log = logging.getLogger("imbi_scheduler")

FIRST_PAUSE = 0.5
LONGEST_PAUSE = 5.0


class StoppedWhileWaiting(Exception):
    """A stop signal came before the database did: nothing was started."""


async def initialize_when_reachable(
    url: str, schema: str, wait: float, stopping: asyncio.Event | None = None
) -> list[str]:
    """Create or upgrade the schema (`initialize`), trying again for up to `wait` seconds
    while the database cannot be reached. Raises the last StoreUnavailable once the wait
    is over, StoppedWhileWaiting when `stopping` is set meanwhile."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    pause = FIRST_PAUSE
    while True:
        try:
            return await initialize(url, schema)
        except StoreUnavailable as exc:
            left = deadline - loop.time()
            if left <= 0:
                raise
            pause = min(pause, left)
            log.warning(
                "PostgreSQL cannot be reached yet (%s): trying again in %.1f s, for %.0f s"
                " more at most (SCHEDULER_DATABASE_WAIT)",
                driver_reason(exc),
                pause,
                left,
            )
            if await _stopped_within(stopping, pause):
                raise StoppedWhileWaiting from None
            pause = min(pause * 2, LONGEST_PAUSE)


async def initialize_unless_stopped(url: str, schema: str, wait: float) -> list[str] | None:
    """`initialize_when_reachable` for `init-db`: SIGTERM, SIGINT or SIGHUP during the
    wait ends it at once (None: nothing was done), as a stop ends `serve`'s wait. Once
    the database answers, the statements run to their end: a schema half made would be
    made whole by the next run, but an operator stopping a wait wants no more than that."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    signals = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    for signum in signals:
        loop.add_signal_handler(signum, stopping.set)
    try:
        return await initialize_when_reachable(url, schema, wait, stopping)
    except StoppedWhileWaiting:
        return None
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)


async def _stopped_within(stopping: asyncio.Event | None, seconds: float) -> bool:
    if stopping is None:
        await asyncio.sleep(seconds)
        return False
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), seconds)
    return stopping.is_set()


def driver_reason(exc: BaseException) -> str:
    """What the driver said of an unreachable database (no such database, role or host,
    a refused connection) on one line, for the operator: the API never shows it. libpq's
    messages name the host, port, role and database, never a password."""
    cause = exc.__cause__
    if not isinstance(exc, StoreUnavailable) or cause is None:
        return ""
    return " ".join(line.strip() for line in str(cause).splitlines() if line.strip())
