"""An httpx transport whose connections go only to addresses the outbound guard checked.

httpx 0.28 takes no network backend, so this transport drives httpcore's HTTP/1.1
connections itself, over a network backend that resolves each host through the guard
and connects to the checked address. Connections are keyed by the URL's origin (scheme,
host, port), and TLS verifies and sends SNI for that host name, as without pinning.

Why not `httpcore.AsyncConnectionPool`: its bookkeeping rescans every connection (and
polls every idle socket) each time a request is queued or a response is closed, and
hands one idle connection to several queued requests, all but one of which then retry;
its CPU per call grows with the number of connections, so with a hundred calls in
flight it costs several times what one call alone does (encode/httpx#3215). The pool
here keeps a stack of idle connections per origin: a call takes the most recently used
one (checking only that one), or opens a new one while under `max_connections`, or
waits for one to come back, all in constant time. Its network streams are plain
asyncio protocols (no AnyIO cancel scopes per read and write), which also coalesce the
request's writes into one send.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import httpcore
import httpx

from adapters.http.guard import OutboundGuard

# httpcore's exceptions as httpx's, most specific first (httpx does the same internally).
_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.ProxyError, httpx.ProxyError),
)

# A stream stops reading from its socket while this much is buffered and unread.
_READ_BUFFER_LIMIT = 256 * 1024
# Queued request bytes are sent at the first read, or once this many are queued.
_WRITE_COALESCE_LIMIT = 64 * 1024
# How often idle connections are looked at for expiry (seconds).
_SWEEP_INTERVAL = 1.0


@contextmanager
def _httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for core_error, httpx_error in _ERRORS:
            if isinstance(exc, core_error):
                raise httpx_error(str(exc)) from exc
        raise


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

    One timer handle, cheaper than an `asyncio.timeout` scope on every read."""
    if seconds is None:
        await waiter
        return
    handle = asyncio.get_running_loop().call_later(seconds, _expire, waiter)
    try:
        await waiter
    finally:
        handle.cancel()


class _Stream(httpcore.AsyncNetworkStream):
    """An httpcore network stream over an asyncio transport and `_Protocol`.

    Writes are queued and sent together at the next read (an HTTP/1.1 client always
    reads after it has written a request), so a request's head and body leave in one
    send. `get_extra_info("is_readable")`, which httpcore asks of an idle connection to
    see whether the server closed it, is answered from the protocol's state without a
    system call.
    """

    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self._pending: list[bytes] = []
        self._pending_size = 0

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        if self._pending:
            await self._flush(timeout)
        protocol = self._protocol
        if not protocol.buffer and not protocol.eof:
            waiter = protocol.waiter = asyncio.get_running_loop().create_future()
            try:
                await _wait(waiter, timeout)
            except TimeoutError:
                raise httpcore.ReadTimeout("timed out reading the response") from None
            finally:
                protocol.waiter = None
        buffer = protocol.buffer
        if buffer:
            if len(buffer) <= max_bytes:
                data = bytes(buffer)
                buffer.clear()
            else:
                data = bytes(buffer[:max_bytes])
                del buffer[:max_bytes]
            if protocol.paused and len(buffer) <= _READ_BUFFER_LIMIT // 2:
                protocol.paused = False
                self._transport.resume_reading()
            return data
        if protocol.error is not None:
            raise httpcore.ReadError(str(protocol.error) or "connection lost") from protocol.error
        return b""

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not buffer:
            return
        if self._protocol.lost or self._transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        self._pending.append(buffer)
        self._pending_size += len(buffer)
        if self._pending_size >= _WRITE_COALESCE_LIMIT:
            await self._flush(timeout)

    async def _flush(self, seconds: float | None) -> None:
        pending, self._pending, self._pending_size = self._pending, [], 0
        protocol = self._protocol
        if protocol.lost or self._transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))
        if not protocol.can_write:
            drain = protocol.drain = asyncio.get_running_loop().create_future()
            try:
                await _wait(drain, seconds)
            except TimeoutError:
                raise httpcore.WriteTimeout("timed out sending the request") from None
            if protocol.lost:
                raise httpcore.WriteError(str(protocol.error) or "connection lost")

    async def aclose(self) -> None:
        self._pending.clear()
        self._transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport,
                    self._protocol,
                    ssl_context,
                    server_hostname=server_hostname,
                    ssl_handshake_timeout=timeout,
                )
        except TimeoutError:
            self._transport.close()
            raise httpcore.ConnectTimeout("timed out in the TLS handshake") from None
        except (OSError, EOFError) as exc:  # ssl.SSLError is an OSError
            self._transport.close()
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        if transport is None:  # the connection went away during the handshake
            raise httpcore.ConnectError("connection closed during the TLS handshake")
        self._transport = self._protocol.transport = transport
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            protocol = self._protocol
            return bool(protocol.buffer) or protocol.eof or self._transport.is_closing()
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        return None


class GuardedNetworkBackend(httpcore.AsyncNetworkBackend):
    """Resolves through the guard, then connects to the first checked address that
    accepts, so the address connected to is always one that was checked."""

    def __init__(self, guard: OutboundGuard) -> None:
        self._guard = guard

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                addresses = await self._guard.resolve(host, port)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from None
        failure: httpcore.ConnectError | None = None
        for address in addresses:
            try:
                return await self._connect(str(address), port, timeout, local_address)
            except httpcore.ConnectError as exc:
                failure = exc
        assert failure is not None  # resolve() returns at least one address
        raise failure

    async def _connect(
        self,
        address: str,
        port: int,
        timeout: float | None,  # noqa: ASYNC109
        local_address: str | None,
    ) -> _Stream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_connection(
                    _Protocol,
                    address,
                    port,
                    local_addr=None if local_address is None else (local_address, 0),
                )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"connecting to {address}:{port} timed out") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        # asyncio has set TCP_NODELAY on the socket already.
        return _Stream(transport, protocol)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not targets")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


# -- the pool -----------------------------------------------------------------------

_OriginKey = tuple[bytes, bytes, int]


def _origin_key(origin: httpcore.Origin) -> _OriginKey:
    return (origin.scheme, origin.host, origin.port)


class _Pool:
    """HTTP/1.1 connections, at most `max_connections` open at once (idle ones
    included), idle ones kept per origin for reuse until `keepalive_expiry`."""

    def __init__(
        self,
        backend: httpcore.AsyncNetworkBackend,
        ssl_context: ssl.SSLContext,
        *,
        max_connections: int,
        keepalive_expiry: float,
    ) -> None:
        self._backend = backend
        self._ssl_context = ssl_context
        self._max = max_connections
        self._keepalive_expiry = keepalive_expiry
        self._idle: dict[_OriginKey, list[httpcore.AsyncHTTP11Connection]] = {}
        # Every open connection (idle or in use), with its origin.
        self._open: dict[httpcore.AsyncHTTP11Connection, _OriginKey] = {}
        self._count = 0  # open connections, idle and connecting ones included
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._next_sweep = 0.0
        self._closed = False

    async def handle(self, request: httpcore.Request) -> httpcore.Response:
        origin = request.url.origin
        if origin.scheme not in (b"http", b"https"):
            scheme = origin.scheme.decode("ascii", errors="replace")
            raise httpcore.UnsupportedProtocol(
                f"Request URL has an unsupported protocol '{scheme}://'."
            )
        timeouts = request.extensions.get("timeout", {})
        while True:
            connection = await self._acquire(_origin_key(origin), timeouts.get("pool"))
            if connection is None:
                try:
                    connection = await self._connect(origin, request, timeouts.get("connect"))
                except BaseException:
                    self._count -= 1
                    self._wake()
                    raise
            try:
                response = await connection.handle_async_request(request)
            except httpcore.ConnectionNotAvailable:
                await self.release(connection)
                continue
            except BaseException:
                await self.release(connection)
                raise
            return httpcore.Response(
                status=response.status,
                headers=response.headers,
                content=_PooledStream(self, connection, response.stream),
                extensions=response.extensions,
            )

    async def _acquire(
        self,
        key: _OriginKey,
        timeout: float | None,  # noqa: ASYNC109
    ) -> httpcore.AsyncHTTP11Connection | None:
        """An idle connection to `key`, or None: a slot to open a new one."""
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        now = time.monotonic()
        if now >= self._next_sweep:
            self._next_sweep = now + _SWEEP_INTERVAL
            await self._sweep()
        while True:
            stack = self._idle.get(key)
            while stack:
                connection = stack.pop()
                if connection.is_idle() and not connection.has_expired():
                    return connection
                await self._discard(connection)
            if self._count < self._max:
                self._count += 1
                return None
            if await self._evict_idle():
                continue
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await _wait(waiter, timeout)
            except BaseException as exc:
                if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                    self._wake()  # woken, but leaving: pass the turn on
                else:
                    with suppress(ValueError):
                        self._waiters.remove(waiter)
                if isinstance(exc, TimeoutError):
                    raise httpcore.PoolTimeout("no connection came free in time") from None
                raise

    async def _connect(
        self,
        origin: httpcore.Origin,
        request: httpcore.Request,
        timeout: float | None,  # noqa: ASYNC109
    ) -> httpcore.AsyncHTTP11Connection:
        host = origin.host.decode("ascii")
        stream = await self._backend.connect_tcp(host, origin.port, timeout=timeout)
        if origin.scheme == b"https":
            sni = request.extensions.get("sni_hostname") or host
            try:
                stream = await stream.start_tls(
                    self._ssl_context, server_hostname=sni, timeout=timeout
                )
            except BaseException:
                await stream.aclose()
                raise
        connection = httpcore.AsyncHTTP11Connection(
            origin=origin, stream=stream, keepalive_expiry=self._keepalive_expiry
        )
        self._open[connection] = _origin_key(origin)
        return connection

    async def release(self, connection: httpcore.AsyncHTTP11Connection) -> None:
        """Take back a connection whose request is over: idle again, or closed."""
        key = self._open.get(connection)
        if key is not None and connection.is_idle() and not self._closed:
            self._idle.setdefault(key, []).append(connection)
            self._wake()
        else:
            await self._discard(connection)

    async def _discard(self, connection: httpcore.AsyncHTTP11Connection) -> None:
        if self._open.pop(connection, None) is not None:
            self._count -= 1
            self._wake()
        if not connection.is_closed():
            await connection.aclose()

    async def _evict_idle(self) -> bool:
        """Close the least recently used idle connection of any origin, if any."""
        for key, stack in self._idle.items():
            if stack:
                await self._discard(stack.pop(0))
                if not stack:
                    del self._idle[key]
                return True
        return False

    async def _sweep(self) -> None:
        """Close idle connections past their keep-alive or closed by the server."""
        for key in list(self._idle):
            stack = self._idle[key]
            keep: list[httpcore.AsyncHTTP11Connection] = []
            expired: list[httpcore.AsyncHTTP11Connection] = []
            for connection in stack:
                (expired if connection.has_expired() or not connection.is_idle() else keep).append(
                    connection
                )
            if expired:
                stack[:] = keep
                for connection in expired:
                    await self._discard(connection)
            if not stack:
                del self._idle[key]

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def aclose(self) -> None:
        self._closed = True
        self._idle.clear()
        connections, self._open = list(self._open), {}
        self._count = 0
        for connection in connections:
            await connection.aclose()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)


class _PooledStream:
    """A response body that gives its connection back to the pool when closed."""

    def __init__(
        self, pool: _Pool, connection: httpcore.AsyncHTTP11Connection, stream: Any
    ) -> None:
        self._pool = pool
        self._connection = connection
        self._stream = stream
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._stream:
            yield part

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._stream.aclose()
        finally:
            await self._pool.release(self._connection)


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        with _httpx_errors():
            await self._stream.aclose()


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
        assert isinstance(request.stream, httpx.AsyncByteStream)
        url = request.url
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _httpx_errors():
            response = await self._pool.handle(core_request)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
