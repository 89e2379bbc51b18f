"""One HTTP/1.1 connection of the guarded transport (adapters/http/transport.py) over a
guarded `Stream`: the request written here, checked as h11 checks it; the answer parsed
by httptools (llhttp, in C), docs/adr/0010."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import httptools
import httpx

from adapters.http.streams import Stream
from application.deadlines import check_may_send

# A connection is keyed by its origin: (scheme, host, port).
Key = tuple[bytes, bytes, int]

# Request bytes are written in pieces of at least this size (a small request: at once).
_WRITE_CHUNK = 64 * 1024
# The largest response head (status line and headers) accepted, as httpcore.
_MAX_HEAD_SIZE = 100 * 1024

# RFC 9110 as h11 reads it: a method and a header name are tokens; a header value is
# visible characters (and obs-text) with single spaces or tabs inside, none at its ends;
# a request target is visible characters.
_TOKEN = re.compile(rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+")
_VALUE = re.compile(rb"(?:[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*)?")
_TARGET = re.compile(rb"[\x21-\x7e]+")


@dataclass(slots=True)
class Head:
    """The status line and headers of an answer (header names as sent)."""

    status_code: int
    reason: bytes
    http_version: bytes
    headers: list[tuple[bytes, bytes]]


@dataclass(slots=True)
class Wire:
    """A request as it goes on the wire: its head (ending in the blank line), its body
    (bytes, or an httpx stream), whether the body goes chunked, whether the request
    asks to close, the Content-Length it declares (checked against the body) and
    whether it is a HEAD request (its answer has no body)."""

    head: bytes
    body: bytes | httpx.AsyncByteStream
    chunked: bool = False
    close: bool = False
    declared: str | None = None
    head_only: bool = False


def request_line(method: bytes, target: bytes) -> bytes:
    if not _TOKEN.fullmatch(method) or not _TARGET.fullmatch(target):
        raise httpx.LocalProtocolError(f"Illegal request line: {method!r} {target!r}")
    return b"%s %s HTTP/1.1\r\n" % (method, target)


def header_line(name: bytes, value: bytes) -> bytes:
    """`name: value` and its line end, checked as h11 checks them."""
    if not _TOKEN.fullmatch(name):
        raise httpx.LocalProtocolError(f"Illegal header name {name!r}")
    if not _VALUE.fullmatch(value):
        raise httpx.LocalProtocolError(f"Illegal header value {value!r}")
    return b"%s: %s\r\n" % (name, value)


def wire(request: httpx.Request) -> Wire:
    """`request` as it goes on the wire, checked as h11 checks it."""
    method = request.method.encode("ascii")
    lines = [request_line(method, request.url.raw_path)]
    chunked = close = has_host = framed = False
    for name, value in request.headers.raw:
        lines.append(header_line(name, value))
        lower = name.lower()
        if lower == b"host":
            has_host = True
        elif lower == b"transfer-encoding":
            if value.lower() != b"chunked":
                raise httpx.LocalProtocolError("Only Transfer-Encoding: chunked is supported")
            chunked = True
        elif lower == b"connection":
            close = close or b"close" in value.lower()
        elif lower == b"content-length":
            framed = True
    if not has_host:
        raise httpx.LocalProtocolError("Missing mandatory Host: header")
    lines.append(b"\r\n")
    # As httpx reads it: several values joined, so that int() fails on them.
    declared = request.headers.get("content-length") if framed else None
    assert isinstance(request.stream, httpx.AsyncByteStream)
    return Wire(b"".join(lines), request.stream, chunked, close, declared, method == b"HEAD")


class _Answer:
    """httptools' callbacks for one answer at a time (1xx answers skipped)."""

    def __init__(self, head_only: bool) -> None:
        self.head_only = head_only  # an answer to HEAD: no body, whatever it says
        self.status = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.head: Head | None = None
        self.body: list[bytes] = []
        self.complete = False
        self.keep_alive = False
        self.framed = False  # Content-Length or chunked: the body's end is known
        self.after = False  # something arrived after the answer

    def on_message_begin(self) -> None:
        if self.complete:
            self.after = True

    def on_status(self, status: bytes) -> None:
        self.status += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        parser = self.parser
        code = parser.get_status_code()
        if 100 <= code < 200:
            self.status, self.headers = b"", []  # informational: the answer follows
            return
        self.head = Head(code, self.status, parser.get_http_version().encode(), self.headers)
        self.framed = code in (204, 304) or any(
            name.lower() in (b"content-length", b"transfer-encoding") for name, _ in self.headers
        )
        if self.head_only:
            self.complete = True

    def on_body(self, body: bytes) -> None:
        if not self.complete:
            self.body.append(body)

    def on_message_complete(self) -> None:
        if self.head is not None and not self.complete:
            self.complete = True
            self.keep_alive = self.parser.should_keep_alive()

    parser: Any = None


class Connection:
    """One HTTP/1.1 connection, serving one request at a time: the pool hands it to one
    caller, and takes it back when that caller's response is closed."""

    def __init__(self, key: Key, stream: Stream, keepalive_expiry: float) -> None:
        self.key = key
        self._stream = stream
        self._keepalive_expiry = keepalive_expiry
        self._expire_at = 0.0
        self._answer = _Answer(False)
        self._parser: Any = None
        self._close_after = False
        self._received = 0
        self.idle = False
        self.closed = False

    def reusable(self, now: float) -> bool:
        return (
            self.idle
            and not self.closed
            and now < self._expire_at
            and not self._stream.closed_by_peer()
        )

    async def send(self, make: Callable[[], Wire], timeouts: dict[str, Any]) -> Head:
        """Send the request `make` builds (once the connection is this caller's, so a
        request that fails its checks fails as it would on the wire) and read the head
        of its answer. On any error (or a cancel) the connection is closed."""
        self.idle = False
        self._received = 0
        try:
            request = make()
            answer = self._answer = _Answer(request.head_only)
            answer.parser = self._parser = httptools.HttpResponseParser(answer)
            # A write error is not final: the server may have answered and closed early
            # (an error answer before the whole body was sent): read what it said, as
            # httpcore does.
            check_may_send()  # not once the run's lease is spent (a stalled process)
            with suppress(httpx.WriteError):
                await self._send(request, timeouts.get("write"))
            seconds = timeouts.get("read")
            while answer.head is None:
                await self._receive(seconds)
            return answer.head
        except BaseException:
            self.close()
            raise

    async def _send(self, request: Wire, seconds: float | None) -> None:
        self._close_after = request.close
        body = request.body
        if isinstance(body, bytes):
            # Made here with its Content-Length: the head and body go out at once.
            await self._stream.write(request.head + body, seconds)
            return
        chunked, declared = request.chunked, request.declared
        pieces, size, sent = [request.head], len(request.head), 0
        async for chunk in body:
            if not chunk:
                continue
            sent += len(chunk)
            if chunked:
                pieces += [b"%x\r\n" % len(chunk), chunk, b"\r\n"]
            else:
                pieces.append(chunk)
            size += len(chunk)
            if declared is not None and sent > int(declared):
                raise httpx.LocalProtocolError("Too much data for declared Content-Length")
            if size >= _WRITE_CHUNK:
                await self._stream.write(b"".join(pieces), seconds)
                pieces, size = [], 0
        if chunked:
            pieces.append(b"0\r\n\r\n")
        elif declared is not None and sent < int(declared):
            raise httpx.LocalProtocolError("Too little data for declared Content-Length")
        await self._stream.write(b"".join(pieces), seconds)

    def _feed(self, data: bytes) -> None:
        answer = self._answer
        if answer.head is None:
            self._received += len(data)
            if self._received > _MAX_HEAD_SIZE:
                raise httpx.RemoteProtocolError("The answer's head is too large")
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if not answer.complete:
                raise httpx.RemoteProtocolError(str(exc) or type(exc).__name__) from exc
            answer.after = True  # the answer is whole; the connection is not reused

    async def _receive(self, seconds: float | None) -> None:
        """Feed what arrives next to the parser; at the end of the connection, end a
        body delimited by it, or fail."""
        data = await self._stream.read(seconds)
        answer = self._answer
        if data:
            self._feed(data)
            return
        if answer.head is None:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        if not answer.complete:
            if answer.framed:
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            answer.complete = True  # the body ended with the connection
        answer.keep_alive = False

    async def body(self, seconds: float | None) -> AsyncIterator[bytes]:
        answer = self._answer
        while True:
            while answer.body:
                yield answer.body.pop(0)
            if answer.complete:
                return
            await self._receive(seconds)

    def arrived(self) -> bytes | None:
        """What `body` would yield, when the answer is complete: taken at once."""
        answer = self._answer
        if not answer.complete:
            return None
        data = b"".join(answer.body)
        answer.body.clear()
        return data

    def response_closed(self) -> None:
        """The caller is done with the answer: idle again when the exchange completed
        and both sides keep the connection, else closed."""
        answer = self._answer
        if not self.closed and not answer.complete:
            self._skip_arrived_body()
        if (
            not self.closed
            and answer.complete
            and answer.keep_alive
            and not answer.after
            and not answer.head_only
            and not self._close_after
        ):
            answer.body.clear()
            self._expire_at = time.monotonic() + self._keepalive_expiry
            self.idle = True
        else:
            self.close()

    def _skip_arrived_body(self) -> None:
        """Read past the rest of an answer the caller stopped reading (the executor
        reads only an excerpt), when all of it has arrived already: the connection can
        then serve another request instead of being closed. No waiting for more."""
        data = self._stream.take_arrived()
        if data:
            with suppress(httpx.RemoteProtocolError):
                self._feed(data)

    def close(self) -> None:
        self.idle = False
        if not self.closed:
            self.closed = True
            self._stream.close()
