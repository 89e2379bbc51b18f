"""The Waker port on PostgreSQL LISTEN/NOTIFY.

One dedicated autocommit connection LISTENs on the schema's two channels (task changes,
cancel requests). When it drops (server restart, `pg_terminate_backend`), a background
task reconnects with a doubling delay; after each reconnect the waker wakes its waiter
once, since a notification may have gone by during the gap. `notify()` sends through a
second, lazily opened connection, because the listening one is busy waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import psycopg
from psycopg import AsyncConnection, sql

from adapters.postgres.liveness import with_liveness
from adapters.postgres.silence import shut_socket
from adapters.postgres.store import channels

log = logging.getLogger(__name__)


class PostgresWaker:
    def __init__(
        self,
        conninfo: str,
        schema: str = "scheduler",
        *,
        first_retry: float = 0.1,
        max_retry: float = 5.0,
        keepalive: float = 30.0,
        connect_timeout: int = 5,
    ) -> None:
        self._conninfo = with_liveness(conninfo)  # a silent end is noticed, not waited out
        self._channels = channels(schema)
        self._first_retry = first_retry
        self._max_retry = max_retry
        self._keepalive = keepalive
        self._connect_timeout = connect_timeout
        self._event = asyncio.Event()
        self._listening = asyncio.Event()
        self._listener: asyncio.Task[None] | None = None
        self._listening_on: AsyncConnection[Any] | None = None
        self._sender: AsyncConnection[Any] | None = None
        self._send_lock = asyncio.Lock()
        self.listening_pid: int | None = None
        """The backend pid of the LISTEN connection, None while it is down."""

    async def start(self) -> None:
        """Start listening and wait (up to `connect_timeout`) until the LISTEN holds; if
        the server is down, return anyway and keep trying in the background."""
        if self._listener is None or self._listener.done():
            self._listener = asyncio.create_task(self._listen_forever(), name="postgres-waker")
        try:
            await asyncio.wait_for(self._listening.wait(), self._connect_timeout)
        except TimeoutError:
            log.warning("the waker is not listening yet; it keeps trying in the background")

    async def wait(self) -> None:
        await self._event.wait()
        self._event.clear()

    async def notify(self) -> None:
        """Wake this engine at once and every other one through NOTIFY. A failure to
        send is logged, not raised: the engines' bounded sleep covers it."""
        self._event.set()
        async with self._send_lock:
            try:
                if self._sender is None or self._sender.closed:
                    self._sender = await AsyncConnection.connect(
                        self._conninfo, autocommit=True, connect_timeout=self._connect_timeout
                    )
                await self._sender.execute(
                    "SELECT pg_notify(%s, '')", (self._channels[0],), prepare=False
                )
            except psycopg.Error as exc:
                log.warning("could not send a wake-up: %s", exc)
                await self._close_sender()

    async def close(self) -> None:
        listener, self._listener = self._listener, None
        if self._listening_on is not None:
            # Shut, not cancelled: psycopg's cancel of a statement out (the keepalive's
            # probe) waits on a database that may answer nothing (docs/adr/0018).
            shut_socket(self._listening_on)
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
        async with self._send_lock:
            await self._close_sender()

    async def _close_sender(self) -> None:
        sender, self._sender = self._sender, None
        if sender is not None:
            with contextlib.suppress(psycopg.Error):
                await sender.close()

    async def _listen_forever(self) -> None:
        delay = self._first_retry
        reconnecting = False
        while True:
            try:
                async with await AsyncConnection.connect(
                    self._conninfo, autocommit=True, connect_timeout=self._connect_timeout
                ) as conn:
                    for channel in self._channels:
                        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    self.listening_pid = conn.info.backend_pid
                    self._listening_on = conn
                    self._listening.set()
                    if reconnecting:
                        log.info("the waker listens again")
                        self._event.set()
                    delay = self._first_retry
                    await self._receive(conn)
            except Exception as exc:  # the listener must outlive any failure
                log.warning("the waker lost its connection (%s); retrying in %.1f s", exc, delay)
            finally:
                self.listening_pid = None
                self._listening_on = None
                self._listening.clear()
            reconnecting = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._max_retry)

    async def _receive(self, conn: AsyncConnection[Any]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            # What has arrived, and what psycopg kept aside while a statement ran.
            async for _ in conn.notifies(timeout=0):
                self._event.set()
            # Sleep on the socket itself: psycopg's own wait for notifications wakes
            # every 0.1 s to look, which an idle replica paid ten times a second.
            if not await _readable(loop, conn.pgconn.socket, self._keepalive):
                # Quiet for a while: prove the connection is alive (a dead peer raises;
                # one that answers nothing is shut after the probe's limit).
                probe_limit = loop.call_later(self._keepalive, shut_socket, conn)
                try:
                    await conn.execute("SELECT 1", prepare=False)
                finally:
                    probe_limit.cancel()


async def _readable(loop: asyncio.AbstractEventLoop, fd: int, seconds: float) -> bool:
    """Whether `fd` became readable (data, or the peer's end) within `seconds`."""
    ready: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, _settle, ready)
    try:
        async with asyncio.timeout(seconds):
            await ready
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)


def _settle(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)
