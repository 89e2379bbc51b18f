"""A connection pool configured the way PostgresTaskStore works best, the way the
store takes connections from it (never one that died while idle), and its
transactions in pipeline mode."""

from __future__ import annotations

import contextlib
import logging
import select
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection, pq
from psycopg_pool import AsyncConnectionPool

from adapters.postgres.liveness import with_liveness
from adapters.postgres.silence import DEFAULT_ANSWER_LIMIT, set_answer_limit, unwatch, watch
from domain.errors import CommitUnanswered

log = logging.getLogger(__name__)

# A connection lost or unusable, as opposed to an error of a statement.
_CONNECTION_ERRORS = (psycopg.OperationalError, psycopg.InterfaceError)


def _not_the_aborted_pipeline(record: logging.LogRecord) -> bool:
    """Drop psycopg's warning that leaving a pipeline met "pipeline aborted" while an
    error was already on its way out: that error is the news (a duplicate name, a task
    changed meanwhile, each answered or retried by the store), and the warning read to
    operators like a database fault (an outside audit counted one per apply retried)."""
    args = record.args if isinstance(record.args, tuple) else ()
    return not (
        record.msg == "error ignored terminating %r: %s"
        and len(args) == 2
        and isinstance(args[1], psycopg.errors.PipelineAborted)
    )


logging.getLogger("psycopg").addFilter(_not_the_aborted_pipeline)


def application_name(schema: str) -> str:
    """How the connections of a scheduler on `schema` name themselves to PostgreSQL
    (`pg_stat_activity.application_name`, at most 63 bytes): what the stalled-transaction
    sweep looks for, and what an operator sees."""
    return f"imbi-scheduler/{schema}"[:63]


def create_pool(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    timeout: float = 5.0,
    reconnect_timeout: float = 5.0,
    check: bool = False,
    name: str | None = None,
    schema: str | None = None,
    answer_limit: float = DEFAULT_ANSWER_LIMIT,
) -> AsyncConnectionPool[AsyncConnection[Any]]:
    """A closed pool on `url`; the caller opens it (`await pool.open(wait=True)`) and
    closes it.

    Connections are in autocommit, so a read is one round trip; the store opens its own
    transactions. Each session's time zone is UTC, so timestamps come back with
    `timezone.utc` (the same instants as with the server's zone, and cheaper for every
    datetime operation than a `ZoneInfo`). `timeout` bounds the wait for a connection:
    past it, calls raise StoreUnavailable.

    `check` makes the pool itself test each connection with a round trip before handing
    it out. The store does not need it: `live_connection` already skips connections
    that died while idle, without a round trip. psycopg_pool also waits a doubling
    delay from one second after each failed check, so after a server restart, with
    every pooled connection dead, its check would hold the first caller for seconds.

    `reconnect_timeout` bounds each of psycopg_pool's rounds of attempts to replace a
    lost connection. Within a round it waits a doubling delay (1, 2, 4 s...) between
    attempts, so after a long outage (its default round is 5 minutes) the next attempt
    could come 16 s or more after the database was back, every request failing till
    then. A round given up leaves the place free, and the next request asks for a
    connection at once: the store answers within about two seconds of the database.

    `schema` names the connections (`application_name`) for the scheduler on it. Each
    connection notices a database that vanished silently within about 20 s
    (`adapters.postgres.liveness`), and one that takes packets but answers nothing once
    a connection has been out `answer_limit` seconds (`adapters.postgres.silence`).
    """
    kwargs: dict[str, Any] = {"autocommit": True}
    if schema is not None:
        kwargs["application_name"] = application_name(schema)
    pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
        with_liveness(url),
        open=False,
        min_size=min_size,
        max_size=max_size,
        timeout=timeout,
        reconnect_timeout=reconnect_timeout,
        name=name,
        kwargs=kwargs,
        check=AsyncConnectionPool.check_connection if check else None,
        configure=_configure,
    )
    set_answer_limit(pool, answer_limit)
    return pool


async def _configure(conn: AsyncConnection[Any]) -> None:
    await conn.execute("SET TIME ZONE 'UTC'")


@asynccontextmanager
async def live_connection(
    pool: AsyncConnectionPool[AsyncConnection[Any]],
) -> AsyncIterator[AsyncConnection[Any]]:
    """A connection from `pool` that had not died while idle, returned to it after use.

    A backend that was terminated or a server that restarted or shut down sends an
    error and closes the socket: an idle connection with something to read is dead (or
    holds a rare notice). Such connections are closed and the next
    one taken, at most once per connection the pool holds, without waiting; the pool
    opens replacements in the background. A connection that dies after this check, or
    silently (a cut network), still fails its statement: the store retries reads, never
    writes.
    """
    for _ in range(pool.max_size):
        conn = await pool.getconn()
        if _alive(conn):
            break
        log.info("a pooled connection died while idle; taking another")
        await conn.close()
        await pool.putconn(conn)  # a closed connection is discarded and replaced
    else:
        conn = await pool.getconn()
    watch(pool, conn)  # a silent database cannot hold it forever
    try:
        yield conn
    finally:
        unwatch(conn)
        await pool.putconn(conn)


@asynccontextmanager
async def pipelined_transaction(conn: AsyncConnection[Any]) -> AsyncIterator[None]:
    """One transaction on `conn` in pipeline mode: statements go out without waiting for
    each other; a round trip happens only where a result is read, and at COMMIT.

    BEGIN and COMMIT are plain statements in the pipeline (`conn.transaction()` would
    add a Sync, so a round trip, at each end). On any exception the transaction is
    rolled back, unless the connection itself is gone, in which case the server has
    already rolled it back and the pool discards the connection.
    """
    committing = False
    try:
        async with conn.pipeline():
            if conn.autocommit:  # otherwise psycopg queues the BEGIN itself
                await conn.execute(b"BEGIN", prepare=False)
            yield
            committing = True
            await conn.execute(b"COMMIT", prepare=False)
    except BaseException as exc:
        unknown = committing and _outcome_unknown(conn, exc)
        if not conn.closed:
            with contextlib.suppress(psycopg.Error):
                await conn.rollback()
        if unknown:
            # The server may have committed before the connection went.
            raise CommitUnanswered("the connection was lost at COMMIT") from exc
        raise


def _outcome_unknown(conn: AsyncConnection[Any], exc: BaseException) -> bool:
    """Whether `exc`, met once COMMIT was sent, leaves the transaction's fate unknown: the
    connection went (closed, or lost with no word from the server), or the server ended
    the session (a FATAL: `pg_terminate_backend`, a shutdown), which it may have done
    after carrying out the COMMIT; the connection may not read as closed yet then. An
    ERROR the server answered (a deadlock, a serialization failure) rolled it back."""
    if not isinstance(exc, _CONNECTION_ERRORS):
        return False
    return conn.closed or exc.diag.severity_nonlocalized != "ERROR"


def _alive(conn: AsyncConnection[Any]) -> bool:
    """False when the connection is closed, or has something to read while idle: an
    idle autocommit connection with no LISTEN is sent nothing but its own end (a rare
    notice also counts, which costs one reconnect)."""
    pgconn = conn.pgconn
    if conn.closed or pgconn.status != pq.ConnStatus.OK:
        return False
    try:
        poller = select.poll()
        poller.register(pgconn.socket, select.POLLIN)
        return not poller.poll(0)
    except (OSError, ValueError, psycopg.OperationalError):
        return False
