"""An httpx transport whose connections go only to addresses the outbound guard checked.

httpx 0.28 takes no network backend, so this transport makes its connections itself:
each host is resolved through the guard and the connection goes to a checked address.
Connections are keyed by the URL's origin (scheme, host, port), and TLS verifies and
sends SNI for that host name, as without pinning. Requests are written by
`connections`, answers parsed by httptools (llhttp, in C; docs/adr/0010).

Why not httpcore's `AsyncConnectionPool`: its bookkeeping rescans every connection (and
polls every idle socket) each time a request is queued or a response is closed, and
hands one idle connection to several queued requests, all but one of which then retry;
so its CPU per call grows with the number of connections, and with a hundred calls in
flight one call costs several times what it costs alone (encode/httpx#3215). Its
connections also take an AnyIO lock (an event-loop round trip) twice per request and
an AnyIO cancel scope per read and write. Here:

- the pool keeps a stack of idle connections per origin: a call takes the most
  recently used one, checking only that one, or opens a new one while fewer than
  `max_connections` are open, or waits for one to come back: constant time per call;
- a connection serves one request at a time by construction, so it needs no lock;
- a connection's stream is a plain asyncio protocol: reads wait on one future with a
  timer, the request goes out in one write, and whether an idle connection was closed
  by the server is known from the protocol's state, without a system call.

Three modules: `streams` (guarded sockets), `connections` (HTTP/1.1 on one of them) and
this one (the pool and the httpx transport over it).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from typing import Any

import httpx

from adapters.http.connections import Connection, Head, Key, Wire, wire
from adapters.http.guard import OutboundGuard
from adapters.http.streams import GuardedNetworkBackend, wait_or_expire
from application.deadlines import check_may_send

_DEFAULT_PORTS = {b"http": 80, b"https": 443}

# How often idle connections are looked at for expiry (seconds).
_SWEEP_INTERVAL = 1.0


# -- the pool -----------------------------------------------------------------------


class _Pool:
    """At most `max_connections` connections open at once (idle ones included); idle
    ones kept per origin for reuse until `keepalive_expiry`."""

    def __init__(
        self,
        backend: GuardedNetworkBackend,
        ssl_context: ssl.SSLContext | None,
        *,
        max_connections: int,
        keepalive_expiry: float,
    ) -> None:
        self._backend = backend
        self._ssl_context = ssl_context
        self._max = max_connections
        self._keepalive_expiry = keepalive_expiry
        self._idle: dict[Key, list[Connection]] = {}  # most recently used last
        self._open: set[Connection] = set()
        self._count = 0  # open connections, idle and connecting ones included
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._next_sweep = 0.0
        self._closed = False

    async def acquire(
        self, key: Key, timeouts: dict[str, Any], sni: str | None = None
    ) -> Connection:
        """An idle connection to `key`, or a new one (TLS names `sni`, by default the
        host); waits while `max_connections` are open and none of them is idle
        (httpx.PoolTimeout after the pool timeout)."""
        pool_timeout = timeouts.get("pool")
        deadline = None if pool_timeout is None else time.monotonic() + pool_timeout
        woken = False
        while True:
            if self._closed:
                raise RuntimeError("the transport is closed")
            now = time.monotonic()
            if now >= self._next_sweep:
                self._sweep(now)
            stack = self._idle.get(key)
            while stack:
                connection = stack.pop()
                if connection.reusable(now):
                    return connection
                self._discard(connection)
            if self._count < self._max:
                self._count += 1
                try:
                    connection = await self._connect(key, sni, timeouts.get("connect"))
                except BaseException:
                    self._count -= 1
                    self._wake()
                    raise
                self._open.add(connection)
                return connection
            if not self._evict_idle():
                # A caller that was woken but lost the connection to a newcomer waits
                # at the front again; the pool timeout counts from its first try.
                await self._wait(None if deadline is None else deadline - now, front=woken)
                woken = True

    async def _connect(self, key: Key, sni: str | None, seconds: float | None) -> Connection:
        check_may_send()  # no connection is opened for a request that may not be sent
        scheme, raw_host, port = key
        host = raw_host.decode("ascii")
        stream = await self._backend.connect_tcp(host, port, seconds)
        if scheme == b"https":
            try:
                context = self._ssl_context or default_ssl_context()
                await stream.start_tls(context, sni or host, seconds)
            except BaseException:
                stream.close()
                raise
        return Connection(key, stream, self._keepalive_expiry)

    async def _wait(self, seconds: float | None, *, front: bool) -> None:
        if seconds is not None and seconds <= 0:
            raise httpx.PoolTimeout("no connection came free in time")
        waiter = asyncio.get_running_loop().create_future()
        if front:
            self._waiters.appendleft(waiter)
        else:
            self._waiters.append(waiter)
        try:
            await wait_or_expire(waiter, seconds)
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._wake()  # woken, but leaving: pass the turn on
            else:
                with suppress(ValueError):
                    self._waiters.remove(waiter)
            if isinstance(exc, TimeoutError):
                raise httpx.PoolTimeout("no connection came free in time") from None
            raise

    def release(self, connection: Connection) -> None:
        """Take back a connection whose exchange is over: idle again, or closed."""
        if connection.idle and not self._closed and connection in self._open:
            self._idle.setdefault(connection.key, []).append(connection)
            self._wake()
        else:
            self._discard(connection)

    def _discard(self, connection: Connection) -> None:
        connection.close()
        if connection in self._open:
            self._open.discard(connection)
            self._count -= 1
            self._wake()

    def _evict_idle(self) -> bool:
        """Close the least recently used idle connection of any origin, if any."""
        for key, stack in self._idle.items():
            if stack:
                self._discard(stack.pop(0))
                if not stack:
                    del self._idle[key]
                return True
        return False

    def _sweep(self, now: float) -> None:
        """Close idle connections past their keep-alive or closed by the server."""
        self._next_sweep = now + _SWEEP_INTERVAL
        for key in list(self._idle):
            stack = self._idle[key]
            if not all(connection.reusable(now) for connection in stack):
                keep = []
                for connection in stack:
                    if connection.reusable(now):
                        keep.append(connection)
                    else:
                        self._discard(connection)
                stack[:] = keep
            if not stack:
                del self._idle[key]

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close(self) -> None:
        self._closed = True
        self._idle.clear()
        connections, self._open = self._open, set()
        self._count = 0
        for connection in connections:
            connection.close()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)


class Body(httpx.AsyncByteStream):
    """A response body; closing it gives its connection back to the pool."""

    def __init__(self, pool: _Pool, connection: Connection, seconds: float | None) -> None:
        self._pool = pool
        self._connection = connection
        self._seconds = seconds
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._connection.body(self._seconds):
                yield part
        except BaseException:
            # Not once closed: a reader that stopped early leaves this generator to be
            # finalized later (GeneratorExit), when the connection may serve another call.
            if not self._closed:
                self._connection.close()
            raise

    def arrived(self) -> bytes | None:
        """The rest of the body when all of it has arrived (reading it then needs no
        waiting), else None."""
        return None if self._closed else self._connection.arrived()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._connection.response_closed()
            self._pool.release(self._connection)


def pool_key(url: httpx.URL) -> Key:
    """The origin a request to `url` goes to: its connections' key."""
    scheme = url.raw_scheme
    if scheme not in _DEFAULT_PORTS:
        shown = scheme.decode("ascii", errors="replace")
        raise httpx.UnsupportedProtocol(f"Request URL has an unsupported protocol '{shown}://'.")
    return scheme, url.raw_host, url.port or _DEFAULT_PORTS[scheme]


@functools.cache
def default_ssl_context() -> ssl.SSLContext:
    """httpx's default context (certifi's roots), made at the first https connection
    and shared: loading the roots costs milliseconds, and plain http needs none."""
    context = httpx.create_ssl_context()
    context.set_alpn_protocols(["http/1.1"])
    return context


class GuardedTransport(httpx.AsyncBaseTransport):
    """A pooled HTTP/1.1 transport that never connects to an address the guard denies."""

    def __init__(
        self,
        guard: OutboundGuard,
        *,
        max_connections: int,
        ssl_context: ssl.SSLContext | None = None,
        keepalive_expiry: float = 5.0,
    ) -> None:
        if ssl_context is not None:
            ssl_context.set_alpn_protocols(["http/1.1"])
        self._pool = _Pool(
            GuardedNetworkBackend(guard),
            ssl_context,
            max_connections=max_connections,
            keepalive_expiry=keepalive_expiry,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        head, body = await self.exchange(request)
        return httpx.Response(
            status_code=head.status_code,
            headers=head.headers,
            stream=body,
            extensions={"http_version": b"HTTP/" + head.http_version, "reason_phrase": head.reason},
        )

    async def exchange(self, request: httpx.Request) -> tuple[Head, Body]:
        """Send `request`; the head of its answer and its body, whose closing gives the
        connection back. What `handle_async_request` does without wrapping the answer in
        an `httpx.Response`."""
        extensions = request.extensions
        return await self.exchange_wire(
            pool_key(request.url),
            functools.partial(wire, request),
            extensions.get("timeout", {}),
            extensions.get("sni_hostname"),
        )

    async def exchange_wire(
        self,
        key: Key,
        make: Callable[[], Wire],
        timeouts: dict[str, Any],
        sni: str | None = None,
    ) -> tuple[Head, Body]:
        """`exchange` for the request `make` builds, to the origin `key` (`pool_key`):
        the executor calls this directly, with its cached heads (docs/adr/0010)."""
        connection = await self._pool.acquire(key, timeouts, sni)
        try:
            head = await connection.send(make, timeouts)
        except BaseException:
            self._pool.release(connection)
            raise
        return head, Body(self._pool, connection, timeouts.get("read"))

    async def aclose(self) -> None:
        self._pool.close()
