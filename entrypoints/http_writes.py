"""The API's connections send each answer in one write.

uvicorn writes an answer's status line and headers, then its body, as two writes on the
socket: two system calls and, on loopback or a real network, two segments for every
request. A profile of task creates put a quarter of the server's CPU in those sends
(docs/engine.md, "One write per answer"). Here each connection's transport gathers the
writes made in one step of the event loop and sends them together at the end of it: an
ASGI answer's `http.response.start` and its body are sent in the same step, so they go
out as one write, and nothing waits longer than that step.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class GatheredWrites(asyncio.Transport):
    """A transport that sends the writes made in one step of the loop as one. Closing
    sends what is gathered first; aborting drops it, as the transport's own buffer is."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._gathered: list[bytes] | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not isinstance(data, bytes):  # the caller may reuse its buffer once we return
            data = bytes(data)
        if self._gathered is None:
            self._gathered = [data]
            self._loop.call_soon(self._send)
        else:
            self._gathered.append(data)

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def _send(self) -> None:
        gathered, self._gathered = self._gathered, None
        if gathered and not self._transport.is_closing():
            self._transport.writelines(gathered)

    def close(self) -> None:
        self._send()
        self._transport.close()

    def abort(self) -> None:
        self._gathered = None
        self._transport.abort()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def write_eof(self) -> None:
        self._send()
        self._transport.write_eof()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        gathered = sum(len(data) for data in self._gathered or ())
        return gathered + self._transport.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()


class OneWriteHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol on a `GatheredWrites` transport."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(GatheredWrites(transport, self.loop))
