"""An httpx transport whose connections go only to addresses the outbound guard checked.

httpx 0.28 takes no network backend, so this transport makes its connections itself:
each host is resolved through the guard and the connection goes to a checked address.
Connections are keyed by the URL's origin (scheme, host, port), and TLS verifies and
sends SNI for that host name, as without pinning. HTTP/1.1 is spoken with h11, the
protocol library httpcore uses.

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
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any

import h11
import httpx

from adapters.http.guard import OutboundGuard

# A connection is keyed by its origin: (scheme, host, port).
_Key = tuple[bytes, bytes, int]
_DEFAULT_PORTS = {b"http": 80, b"https": 443}

_READ_SIZE = 64 * 1024
# A stream stops reading from its socket while this much is buffered and unread.
_READ_BUFFER_LIMIT = 256 * 1024
# Request bytes are written in pieces of at least this size (a small request: at once).
_WRITE_CHUNK = 64 * 1024
# The largest response head (status line and headers) accepted, as httpcore.
_MAX_HEAD_SIZE = 100 * 1024
# How often idle connections are looked at for expiry (seconds).
_SWEEP_INTERVAL = 1.0


# -- network streams ----------------------------------------------------------------


class _Protocol(asyncio.Protocol):
    """Buffers what arrives on one connection for `_Stream`."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.eof = False
        self.lost = False
        self.error: BaseException | None = None
        self.paused = False  # reading paused: the buffer is full
        self.waiter: asyncio.Future[None] | None = None  # a read waiting for data
        self.drain: asyncio.Future[None] | None = None  # a write waiting for room
        self.can_write = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > _READ_BUFFER_LIMIT and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake_reader()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake_reader()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = self.lost = True
        self.error = exc
        self._wake_reader()
        self._wake_writer()

    def pause_writing(self) -> None:
        self.can_write = False

    def resume_writing(self) -> None:
        self.can_write = True
        self._wake_writer()

    def _wake_reader(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake_writer(self) -> None:
        drain, self.drain = self.drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


async def _wait(waiter: asyncio.Future[None], seconds: float | None) -> None:
    """Wait for `waiter`; raise TimeoutError after `seconds` (None: no limit).

    One timer handle: cheaper than an `asyncio.timeout` scope around every read."""
    if seconds is None:
        await waiter
        return
    handle = asyncio.get_running_loop().call_later(seconds, _expire, waiter)
    try:
        await waiter
    finally:
        handle.cancel()


class _Stream:
    """One TCP (or TLS) connection over an asyncio transport and `_Protocol`."""

    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol

    async def read(self, seconds: float | None) -> bytes:
        """What has arrived (up to `_READ_SIZE` bytes), or b"" at the end."""
        protocol = self._protocol
        if not protocol.buffer and not protocol.eof:
            waiter = protocol.waiter = asyncio.get_running_loop().create_future()
            try:
                await _wait(waiter, seconds)
            except TimeoutError:
                raise httpx.ReadTimeout("timed out reading the response") from None
            finally:
                protocol.waiter = None
        buffer = protocol.buffer
        if buffer:
            if len(buffer) <= _READ_SIZE:
                data = bytes(buffer)
                buffer.clear()
            else:
                data = bytes(buffer[:_READ_SIZE])
                del buffer[:_READ_SIZE]
            if protocol.paused and len(buffer) <= _READ_BUFFER_LIMIT // 2:
                protocol.paused = False
                self._transport.resume_reading()
            return data
        if protocol.error is not None:
            raise httpx.ReadError(str(protocol.error) or "connection lost") from protocol.error
        return b""

    async def write(self, data: bytes, seconds: float | None) -> None:
        protocol = self._protocol
        if protocol.lost or self._transport.is_closing():
            raise httpx.WriteError("the connection is closed")
        self._transport.write(data)
        if not protocol.can_write:
            drain = protocol.drain = asyncio.get_running_loop().create_future()
            try:
                await _wait(drain, seconds)
            except TimeoutError:
                raise httpx.WriteTimeout("timed out sending the request") from None
            if protocol.lost:
                raise httpx.WriteError(str(protocol.error) or "connection lost")

    async def start_tls(
        self, context: ssl.SSLContext, server_hostname: str, seconds: float | None
    ) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(seconds):
                transport = await loop.start_tls(
                    self._transport, self._protocol, context, server_hostname=server_hostname
                )
        except TimeoutError:
            self.close()
            raise httpx.ConnectTimeout("timed out in the TLS handshake") from None
        except (OSError, EOFError) as exc:  # ssl.SSLError is an OSError
            self.close()
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        if transport is None:  # the connection went away during the handshake
            self.close()
            raise httpx.ConnectError("connection closed during the TLS handshake")
        self._transport = self._protocol.transport = transport

    def take_arrived(self) -> bytes:
        """What has arrived and not been read, without waiting (b"": nothing)."""
        protocol = self._protocol
        data = bytes(protocol.buffer)
        protocol.buffer.clear()
        if protocol.paused:
            protocol.paused = False
            self._transport.resume_reading()
        return data

    def closed_by_peer(self) -> bool:
        """Whether an idle connection can no longer be used: the server closed it, or
        sent something no request asked for."""
        protocol = self._protocol
        return bool(protocol.buffer) or protocol.eof or self._transport.is_closing()

    def close(self) -> None:
        self._transport.close()


class GuardedNetworkBackend:
    """Resolves through the guard, then connects to the first checked address that
    accepts, so the address connected to is always one that was checked."""

    def __init__(self, guard: OutboundGuard) -> None:
        self._guard = guard

    async def connect_tcp(self, host: str, port: int, seconds: float | None) -> _Stream:
        try:
            async with asyncio.timeout(seconds):
                addresses = await self._guard.resolve(host, port)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"resolving {host} timed out") from None
        failure: httpx.ConnectError | None = None
        for address in addresses:
            try:
                return await self._connect(str(address), port, seconds)
            except httpx.ConnectError as exc:
                failure = exc
        assert failure is not None  # resolve() returns at least one address
        raise failure

    async def _connect(self, address: str, port: int, seconds: float | None) -> _Stream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(seconds):
                # asyncio sets TCP_NODELAY on the socket.
                transport, protocol = await loop.create_connection(_Protocol, address, port)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {address}:{port} timed out") from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        return _Stream(transport, protocol)


# -- HTTP/1.1 connections -----------------------------------------------------------


class _Connection:
    """One HTTP/1.1 connection (h11), serving one request at a time: the pool hands it
    to one caller, and takes it back when that caller's response is closed."""

    def __init__(self, key: _Key, stream: _Stream, keepalive_expiry: float) -> None:
        self.key = key
        self._stream = stream
        self._h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD_SIZE)
        self._keepalive_expiry = keepalive_expiry
        self._expire_at = 0.0
        self.idle = False
        self.closed = False

    def reusable(self, now: float) -> bool:
        return (
            self.idle
            and not self.closed
            and now < self._expire_at
            and not self._stream.closed_by_peer()
        )

    async def send(self, request: httpx.Request, timeouts: dict[str, Any]) -> h11.Response:
        """Send `request` and read the head of its answer. On any error (or a cancel)
        the connection is closed."""
        self.idle = False
        try:
            # A write error is not final: the server may have answered and closed early
            # (an error answer before the whole body was sent): read what it said, as
            # httpcore does.
            with suppress(httpx.WriteError):
                await self._send(request, timeouts.get("write"))
            seconds = timeouts.get("read")
            while True:
                event = await self._next_event(seconds)
                if isinstance(event, h11.Response):
                    return event
                # An InformationalResponse (1xx): the answer follows.
        except BaseException:
            self.close()
            raise

    async def _send(self, request: httpx.Request, seconds: float | None) -> None:
        state = self._h11
        try:
            pieces = [
                state.send(
                    h11.Request(
                        method=request.method,
                        target=request.url.raw_path,
                        headers=request.headers.raw,
                    )
                )
            ]
            size = len(pieces[0] or b"")
            assert isinstance(request.stream, httpx.AsyncByteStream)
            async for chunk in request.stream:
                if chunk:
                    piece = state.send(h11.Data(data=chunk)) or b""
                    pieces.append(piece)
                    size += len(piece)
                    if size >= _WRITE_CHUNK:
                        await self._stream.write(b"".join(p for p in pieces if p), seconds)
                        pieces, size = [], 0
            pieces.append(state.send(h11.EndOfMessage()))
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc)) from exc
        await self._stream.write(b"".join(p for p in pieces if p), seconds)

    async def _next_event(self, seconds: float | None) -> Any:
        state = self._h11
        while True:
            try:
                event = state.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc)) from exc
            if event is not h11.NEED_DATA:
                return event
            data = await self._stream.read(seconds)
            if not data and state.their_state is h11.SEND_RESPONSE:
                raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
            state.receive_data(data)

    async def body(self, seconds: float | None) -> AsyncIterator[bytes]:
        while True:
            event = await self._next_event(seconds)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage) or event is h11.PAUSED:
                return

    def response_closed(self) -> None:
        """The caller is done with the answer: idle again when the exchange completed
        and both sides keep the connection, else closed."""
        state = self._h11
        if not self.closed and state.their_state is h11.SEND_BODY:
            self._skip_arrived_body()
        if not self.closed and state.our_state is h11.DONE and state.their_state is h11.DONE:
            state.start_next_cycle()
            self._expire_at = time.monotonic() + self._keepalive_expiry
            self.idle = True
        else:
            self.close()

    def _skip_arrived_body(self) -> None:
        """Read past the rest of an answer the caller stopped reading (the executor
        reads only an excerpt), when all of it has arrived already: the connection can
        then serve another request instead of being closed. No waiting for more."""
        state = self._h11
        try:
            while state.their_state is h11.SEND_BODY:
                if state.next_event() is h11.NEED_DATA:
                    data = self._stream.take_arrived()
                    if not data:
                        return
                    state.receive_data(data)
        except h11.RemoteProtocolError:
            return  # closed by the caller of this method: the exchange is not DONE

    def close(self) -> None:
        self.idle = False
        if not self.closed:
            self.closed = True
            self._stream.close()


# -- the pool -----------------------------------------------------------------------


class _Pool:
    """At most `max_connections` connections open at once (idle ones included); idle
    ones kept per origin for reuse until `keepalive_expiry`."""

    def __init__(
        self,
        backend: GuardedNetworkBackend,
        ssl_context: ssl.SSLContext,
        *,
        max_connections: int,
        keepalive_expiry: float,
    ) -> None:
        self._backend = backend
        self._ssl_context = ssl_context
        self._max = max_connections
        self._keepalive_expiry = keepalive_expiry
        self._idle: dict[_Key, list[_Connection]] = {}  # most recently used last
        self._open: set[_Connection] = set()
        self._count = 0  # open connections, idle and connecting ones included
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._next_sweep = 0.0
        self._closed = False

    async def acquire(self, key: _Key, request: httpx.Request) -> _Connection:
        """An idle connection to `key`, or a new one; waits while `max_connections`
        are open and none of them is idle (httpx.PoolTimeout after the pool timeout)."""
        timeouts = request.extensions.get("timeout", {})
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
                    connection = await self._connect(key, request, timeouts.get("connect"))
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

    async def _connect(
        self, key: _Key, request: httpx.Request, seconds: float | None
    ) -> _Connection:
        scheme, raw_host, port = key
        host = raw_host.decode("ascii")
        stream = await self._backend.connect_tcp(host, port, seconds)
        if scheme == b"https":
            sni = request.extensions.get("sni_hostname") or host
            try:
                await stream.start_tls(self._ssl_context, sni, seconds)
            except BaseException:
                stream.close()
                raise
        return _Connection(key, stream, self._keepalive_expiry)

    async def _wait(self, seconds: float | None, *, front: bool) -> None:
        if seconds is not None and seconds <= 0:
            raise httpx.PoolTimeout("no connection came free in time")
        waiter = asyncio.get_running_loop().create_future()
        if front:
            self._waiters.appendleft(waiter)
        else:
            self._waiters.append(waiter)
        try:
            await _wait(waiter, seconds)
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._wake()  # woken, but leaving: pass the turn on
            else:
                with suppress(ValueError):
                    self._waiters.remove(waiter)
            if isinstance(exc, TimeoutError):
                raise httpx.PoolTimeout("no connection came free in time") from None
            raise

    def release(self, connection: _Connection) -> None:
        """Take back a connection whose exchange is over: idle again, or closed."""
        if connection.idle and not self._closed and connection in self._open:
            self._idle.setdefault(connection.key, []).append(connection)
            self._wake()
        else:
            self._discard(connection)

    def _discard(self, connection: _Connection) -> None:
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


class _Body(httpx.AsyncByteStream):
    """A response body; closing it gives its connection back to the pool."""

    def __init__(self, pool: _Pool, connection: _Connection, seconds: float | None) -> None:
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

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._connection.response_closed()
            self._pool.release(self._connection)


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
        context = ssl_context or httpx.create_ssl_context()
        context.set_alpn_protocols(["http/1.1"])
        self._pool = _Pool(
            GuardedNetworkBackend(guard),
            context,
            max_connections=max_connections,
            keepalive_expiry=keepalive_expiry,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        scheme = url.raw_scheme
        if scheme not in _DEFAULT_PORTS:
            shown = scheme.decode("ascii", errors="replace")
            raise httpx.UnsupportedProtocol(
                f"Request URL has an unsupported protocol '{shown}://'."
            )
        key = (scheme, url.raw_host, url.port or _DEFAULT_PORTS[scheme])
        timeouts = request.extensions.get("timeout", {})
        connection = await self._pool.acquire(key, request)
        try:
            head = await connection.send(request, timeouts)
        except BaseException:
            self._pool.release(connection)
            raise
        return httpx.Response(
            status_code=head.status_code,
            headers=head.headers.raw_items(),
            stream=_Body(self._pool, connection, timeouts.get("read")),
            extensions={"http_version": b"HTTP/" + head.http_version, "reason_phrase": head.reason},
        )

    async def aclose(self) -> None:
        self._pool.close()
