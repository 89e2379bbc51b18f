"""Bounding the wait on a database that takes packets but answers nothing.

A server that froze, storage that hangs, or a pooler in front of a server that stopped
answering: the host still acknowledges every packet, so the keepalives of
`adapters.postgres.liveness` are answered and libpq never notices; a statement out on
such a connection waits for as long as the silence lasts. psycopg's own cancellation
does not end it either: it asks the server to cancel (which is as silent), then waits
on. So each connection the store takes from its pool is watched while it is out: held
longer than the pool's answer limit, its socket is shut down, which the waiting
statement reads as a lost connection, as it would a reset (docs/reliability.md, "A
database that stops answering with its connections open"). A read so cut answers 503 at
once, rather than trying another connection that is likely as silent; a write answers
503 (it may have committed, as after any connection lost at COMMIT); the engine's pass
fails and is tried again.

The limit bounds a whole checkout (a transaction's statements together), so it sits far
above what the store's work takes: a 10,000-task apply commits in about 2 s here.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

log = logging.getLogger(__name__)

DEFAULT_ANSWER_LIMIT = 30.0  # seconds; SCHEDULER_DATABASE_ANSWER_TIMEOUT

_limits: weakref.WeakKeyDictionary[AsyncConnectionPool[Any], float] = weakref.WeakKeyDictionary()
_cut: weakref.WeakSet[AsyncConnection[Any]] = weakref.WeakSet()
# The connections out now, each with its timer and the loop time it fires at; and,
# once `hurry` was called, the loop time by which every connection out must be back.
_out: dict[int, tuple[AsyncConnection[Any], asyncio.TimerHandle]] = {}
_hurried: tuple[asyncio.AbstractEventLoop, float] | None = None


def set_answer_limit(pool: AsyncConnectionPool[Any], seconds: float) -> None:
    _limits[pool] = seconds


def answer_limit(pool: AsyncConnectionPool[Any]) -> float:
    return _limits.get(pool, DEFAULT_ANSWER_LIMIT)


def was_cut(conn: AsyncConnection[Any]) -> bool:
    """Whether `conn` was shut for waiting past its limit (its error is the silence's)."""
    return conn in _cut


@contextmanager
def watched(pool: AsyncConnectionPool[Any], conn: AsyncConnection[Any]) -> Iterator[None]:
    """Shut `conn`'s socket if it is still out `answer_limit(pool)` seconds from now
    (sooner once the process is stopping: `hurry`)."""
    loop = asyncio.get_running_loop()
    at = loop.time() + answer_limit(pool)
    if _hurried is not None and _hurried[0] is loop:
        at = min(at, _hurried[1])
    key = id(conn)
    _out[key] = (conn, loop.call_at(at, _shut, conn, at - loop.time()))
    try:
        yield
    finally:
        _out.pop(key)[1].cancel()


def hurry(seconds: float) -> None:
    """From now on, shut every connection still out `seconds` from now (a stopping
    process gives requests in flight a grace: one waiting on a silent database then
    answers 503 within it, rather than being cut off without an answer). Call it on the
    event loop's thread."""
    global _hurried
    loop = asyncio.get_running_loop()
    until = loop.time() + seconds
    _hurried = (loop, until)
    for key, (conn, timer) in list(_out.items()):
        if timer.when() > until:
            timer.cancel()
            _out[key] = (conn, loop.call_at(until, _shut, conn, seconds))


def _shut(conn: AsyncConnection[Any], waited: float) -> None:
    if conn.closed:
        return
    _cut.add(conn)
    log.warning(
        "a database connection was out %.0f s without the database answering: it is shut,"
        " and what waited on it fails as on a lost connection",
        waited,
    )
    try:
        # On a duplicate of the descriptor: shutting the socket ends the connection for
        # both, and closing the duplicate leaves libpq's own descriptor to libpq.
        with socket.socket(fileno=os.dup(conn.pgconn.socket)) as duplicate:
            duplicate.shutdown(socket.SHUT_RDWR)
    except (OSError, ValueError) as exc:  # already gone, or no socket left to shut
        log.info("shutting a silent connection: %s", exc)
