"""Bounding the wait on a database that takes packets but answers nothing.

A server that froze, storage that hangs, or a pooler in front of a server that stopped
answering: the host still acknowledges every packet, so the keepalives of
`adapters.postgres.liveness` are answered and libpq never notices; a statement out on
such a connection waits for as long as the silence lasts. psycopg's own cancellation
does not end it either: it asks the server to cancel (which is as silent), then waits
on. So each connection the store takes from its pool is watched while it is out: once
it has waited on the database longer than the pool's answer limit, its socket is shut
down, which the waiting statement reads as a lost connection, as it would a reset
(docs/reliability.md, "A database that stops answering with its connections open").
A read so cut answers 503 at once, rather than trying another connection that is likely
as silent; a write answers 503 (it may have committed, as after any connection lost at
COMMIT); the engine's pass fails and is tried again.

The limit bounds how long a connection waits on the database without a break (the
statements of a transaction pipelined together count as one wait), far above what the
store's statements take: a 10,000-task apply commits in about 2 s here.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import weakref
from typing import Any

import psycopg
from psycopg import AsyncConnection, pq
from psycopg_pool import AsyncConnectionPool

from domain.errors import StoreUnavailable

log = logging.getLogger(__name__)


class DatabaseSilent(StoreUnavailable):
    """A read whose connection was shut for waiting past the answer limit: the database
    takes packets but answers nothing, and asking again soon would wait as long."""


DEFAULT_ANSWER_LIMIT = 30.0  # seconds; SCHEDULER_DATABASE_ANSWER_TIMEOUT

_limits: weakref.WeakKeyDictionary[AsyncConnectionPool[Any], float] = weakref.WeakKeyDictionary()
_cut: weakref.WeakSet[AsyncConnection[Any]] = weakref.WeakSet()
# Seconds between looks at the connections out.
_SAMPLE = 1.0
# The connections out now, by id, on each event loop, with the timer of each loop's
# looks (running while one is out); and, once `hurry` was called, its loop and the loop
# time by which a connection still waiting on the database is shut.
_out: dict[asyncio.AbstractEventLoop, dict[int, _Watch]] = {}
_looks: dict[asyncio.AbstractEventLoop, asyncio.TimerHandle] = {}
_hurried: tuple[asyncio.AbstractEventLoop, float] | None = None


def set_answer_limit(pool: AsyncConnectionPool[Any], seconds: float) -> None:
    _limits[pool] = seconds


def answer_limit(pool: AsyncConnectionPool[Any]) -> float:
    return _limits.get(pool, DEFAULT_ANSWER_LIMIT)


def was_cut(conn: AsyncConnection[Any]) -> bool:
    """Whether `conn` was shut for waiting past its limit (its error is the silence's)."""
    return conn in _cut


class _Watch:
    """One connection out: shut once it has waited on the database (a command in
    progress, libpq's ACTIVE) `limit` seconds in a row, as the looks every `_SAMPLE`
    seconds see it. The time the store spends on its own work between statements (a
    re-plan's searches, say) holds nothing against it: the server owes no answer then."""

    __slots__ = ("conn", "limit", "since", "waiting_since")

    def __init__(self, conn: AsyncConnection[Any], limit: float, now: float) -> None:
        self.conn = conn
        self.limit = limit
        self.since = now
        self.waiting_since: float | None = None

    def look(self, now: float, hurried_until: float | None) -> None:
        if self.conn.closed:
            return
        if self.conn.pgconn.transaction_status != pq.TransactionStatus.ACTIVE:
            self.waiting_since = None
            return
        if self.waiting_since is None:  # waiting since the last look at the latest
            self.waiting_since = max(self.since, now - _SAMPLE)
        waited = now - self.waiting_since
        if waited >= self.limit or (hurried_until is not None and now >= hurried_until):
            _shut(self.conn, waited)


def _look_all(loop: asyncio.AbstractEventLoop) -> None:
    """Look at every connection out on `loop`; again in `_SAMPLE` seconds while any is."""
    _look_once(loop)
    if _out.get(loop):
        _looks[loop] = loop.call_later(_SAMPLE, _look_all, loop)
    else:
        _looks.pop(loop, None)


def watch(pool: AsyncConnectionPool[Any], conn: AsyncConnection[Any]) -> None:
    """From now until `unwatch`, shut `conn`'s socket once it has waited
    `answer_limit(pool)` seconds on the database (sooner once the process is stopping:
    `hurry`). One timer per event loop looks at every connection out, so a checkout
    costs two dictionary writes."""
    loop = asyncio.get_running_loop()
    _out.setdefault(loop, {})[id(conn)] = _Watch(conn, answer_limit(pool), loop.time())
    if loop not in _looks:
        _looks[loop] = loop.call_later(_SAMPLE, _look_all, loop)


def unwatch(conn: AsyncConnection[Any]) -> None:
    _out[asyncio.get_running_loop()].pop(id(conn), None)


def hurry(seconds: float) -> None:
    """From `seconds` from now, shut every connection out that is waiting on the
    database (a stopping process gives requests in flight a grace: one waiting on a
    silent database then answers 503 within it, rather than being cut off without an
    answer). Call it on the event loop's thread."""
    global _hurried
    loop = asyncio.get_running_loop()
    _hurried = (loop, loop.time() + seconds)
    # A look at that very time, besides the looks every _SAMPLE seconds: the shut then
    # comes at `seconds`, not up to a sample later, which a busy machine may need.
    loop.call_at(_hurried[1], _look_once, loop)


def _look_once(loop: asyncio.AbstractEventLoop) -> None:
    now = loop.time()
    hurried_until = _hurried[1] if _hurried is not None and _hurried[0] is loop else None
    for watch in list(_out.get(loop, {}).values()):
        watch.look(now, hurried_until)


def _shut(conn: AsyncConnection[Any], waited: float) -> None:
    if conn.closed:
        return
    _cut.add(conn)
    log.warning(
        "a database connection was out %.0f s without the database answering: it is shut,"
        " and what waited on it fails as on a lost connection",
        waited,
    )
    shut_socket(conn)


def shut_socket(conn: AsyncConnection[Any]) -> None:
    """End `conn` at once, without a word to the server (which may answer none): what
    waits on it, or waits next, fails as on a lost connection."""
    if conn.closed:
        return
    try:
        # On a duplicate of the descriptor: shutting the socket ends the connection for
        # both, and closing the duplicate leaves libpq's own descriptor to libpq.
        with socket.socket(fileno=os.dup(conn.pgconn.socket)) as duplicate:
            duplicate.shutdown(socket.SHUT_RDWR)
    except (OSError, ValueError, psycopg.OperationalError) as exc:  # no socket left to shut
        log.info("shutting a connection: %s", exc)
