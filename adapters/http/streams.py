"""Network streams for the guarded transport (adapters/http/transport.py): connections
made only to addresses the outbound guard checked, each a plain asyncio protocol whose
reads wait on one future with a timer, so that a read costs no task and no lock."""

from __future__ import annotations

import asyncio
import ssl
from typing import cast

import httpx

from adapters.http.guard import OutboundGuard
from application.deadlines import Expiry

READ_SIZE = 64 * 1024
# A stream stops reading from its socket while this much is buffered and unread.
_READ_BUFFER_LIMIT = 256 * 1024


class _Protocol(asyncio.Protocol):
    """Buffers what arrives on one connection for `Stream`."""

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
        self.transport = cast(asyncio.Transport, transport)  # uvloop: not a subclass

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


async def wait_or_expire(waiter: asyncio.Future[None], seconds: float | None) -> None:
    """Wait for `waiter`; raise TimeoutError after `seconds` (None: no limit).

    One timer: cheaper than an `asyncio.timeout` scope around every read. It gives what
    arrived while the process was frozen its time to be read (application/deadlines.py).
    """
    if seconds is None:
        await waiter
        return
    expiry = Expiry(asyncio.get_running_loop(), seconds, lambda: _expire(waiter))
    try:
        await waiter
    finally:
        expiry.cancel()


class Stream:
    """One TCP (or TLS) connection over an asyncio transport and `_Protocol`."""

    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol

    async def read(self, seconds: float | None) -> bytes:
        """What has arrived (up to `READ_SIZE` bytes), or b"" at the end."""
        protocol = self._protocol
        if not protocol.buffer and not protocol.eof:
            waiter = protocol.waiter = asyncio.get_running_loop().create_future()
            try:
                await wait_or_expire(waiter, seconds)
            except TimeoutError:
                raise httpx.ReadTimeout("timed out reading the response") from None
            finally:
                protocol.waiter = None
        buffer = protocol.buffer
        if buffer:
            if len(buffer) <= READ_SIZE:
                data = bytes(buffer)
                buffer.clear()
            else:
                data = bytes(buffer[:READ_SIZE])
                del buffer[:READ_SIZE]
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
                await wait_or_expire(drain, seconds)
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

    async def connect_tcp(self, host: str, port: int, seconds: float | None) -> Stream:
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

    async def _connect(self, address: str, port: int, seconds: float | None) -> Stream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(seconds):
                # asyncio sets TCP_NODELAY on the socket.
                transport, protocol = await loop.create_connection(_Protocol, address, port)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {address}:{port} timed out") from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        return Stream(transport, protocol)
