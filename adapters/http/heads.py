"""Cached request heads: the executor's fast path (docs/engine.md, "HTTP executor").

Most of a call's request is the same for every call of a plain (untemplated) target:
the request line, `Host`, the client's headers and the target's own. A `CachedHead`
keeps them as the bytes they are on the wire, checked once; a call adds its own
headers (the scheduler's, headers_env's, Authorization), the body's Content-Length
and Content-Type and the signature, and goes out without an `httpx.Request`.

A head is cached under everything it is made of (method, URL, the target's headers,
the names of the call's own headers, whether there is a body), so a changed target
finds another. Requests whose call headers would move or replace one of the fixed
ones get no head: `build_request` builds them as before (a test compares the two).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

import httpx

from adapters.http.connections import Wire, header_line, request_line
from adapters.http.requests import PreparedRequest, arrange, header_pairs, parse_url
from adapters.http.transport import pool_key

Pairs = list[tuple[bytes, bytes]]

# Fixed headers that make a request need the general path's checks.
_FRAMING = frozenset({b"host", b"content-length", b"transfer-encoding"})
# Call headers that change where or whether other headers go, or how the request ends.
_LAYOUT = _FRAMING | {b"connection", b"content-type", b"user-agent"}


@dataclass(frozen=True, slots=True)
class CachedHead:
    """A request's head up to the call's own headers, and what follows them."""

    key: tuple[bytes, bytes, int]  # the pool's: scheme, host, port
    front: bytes  # request line and the headers before the call's own, checked
    length: bool  # the body's Content-Length follows the call's headers
    json_type: bool  # then its Content-Type
    close: bool  # the request asks to close the connection
    head_only: bool  # HEAD: the answer has no body

    def wire(self, calls: Pairs, content: bytes, signed: Pairs) -> Wire:
        """The request with the call's headers, its body and its signature headers
        (each header checked as on the general path)."""
        lines = [self.front]
        lines += [header_line(name, value) for name, value in calls]
        if self.length:
            lines.append(b"Content-Length: %d\r\n" % len(content))
        if self.json_type:
            lines.append(b"Content-Type: application/json\r\n")
        lines += [header_line(name, value) for name, value in signed]
        lines.append(b"\r\n")
        return Wire(b"".join(lines), content, close=self.close, head_only=self.head_only)


class Heads:
    """The `CachedHead`s of an executor's client, the `size` most recently used."""

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._heads: OrderedDict[Hashable, CachedHead | None] = OrderedDict()

    def get(
        self, client_headers: httpx.Headers, request: PreparedRequest, calls: Pairs
    ) -> CachedHead | None:
        """The head of `request` around its call headers `calls`; None when it has to
        be built the general way (`request.fixed` None, or see `_made`)."""
        fixed = request.fixed
        if fixed is None:
            return None
        has_body = request.has_body
        names = tuple(name for name, _ in calls)
        key = (request.method, request.url, tuple(fixed.items()), names, has_body)
        heads = self._heads
        if key in heads:
            heads.move_to_end(key)
            return heads[key]
        head = heads[key] = _made(client_headers.raw, request, fixed, names, has_body)
        if len(heads) > self._size:
            heads.popitem(last=False)
        return head


def _made(
    client_headers: Pairs,
    request: PreparedRequest,
    fixed: dict[str, str],
    names: tuple[bytes, ...],
    has_body: bool,
) -> CachedHead | None:
    """The head, made as `build_request` and the connection would make it; None for a
    request the general path must build (and may refuse, with its own error)."""
    try:
        url = parse_url(request.url)
        key = pool_key(url)
    except (httpx.InvalidURL, httpx.UnsupportedProtocol):
        return None
    if url.userinfo:
        return None  # httpx's client makes it Basic auth
    pairs = header_pairs(fixed)
    fixed_names = {name.lower() for name, _ in pairs}
    calls = [name.lower() for name in names]
    if (
        fixed_names & _FRAMING
        or fixed_names.intersection(calls)
        or _LAYOUT.intersection(calls)
        or len(set(calls)) < len(calls)
    ):
        return None
    # The call's headers stay last (and in order) in `arrange`: what is before them
    # is the same for every call with these names.
    arranged, length, json_type = arrange(
        client_headers, request.method, url, pairs + [(name, b"") for name in names], has_body
    )
    front = arranged[: len(arranged) - len(names)]
    method = request.method.upper()
    try:
        lines = [request_line(method.encode("ascii"), url.raw_path)]
        lines += [header_line(name, value) for name, value in front]
    except (httpx.LocalProtocolError, UnicodeEncodeError):
        return None
    lowered = [(name.lower(), value.lower()) for name, value in front]
    if not any(name == b"host" for name, _ in lowered):
        return None
    close = any(name == b"connection" and b"close" in value for name, value in lowered)
    return CachedHead(key, b"".join(lines), length, json_type, close, method == "HEAD")
