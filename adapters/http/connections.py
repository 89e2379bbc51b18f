"""One HTTP/1.1 connection of the guarded transport (adapters/http/transport.py),
spoken with h11 (the protocol library httpcore uses) over a guarded `Stream`."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any

import h11
import httpx

from adapters.http.streams import Stream

# A connection is keyed by its origin: (scheme, host, port).
Key = tuple[bytes, bytes, int]

# Request bytes are written in pieces of at least this size (a small request: at once).
_WRITE_CHUNK = 64 * 1024
# The largest response head (status line and headers) accepted, as httpcore.
_MAX_HEAD_SIZE = 100 * 1024


class Connection:
    """One HTTP/1.1 connection (h11), serving one request at a time: the pool hands it
    to one caller, and takes it back when that caller's response is closed."""

    def __init__(self, key: Key, stream: Stream, keepalive_expiry: float) -> None:
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
