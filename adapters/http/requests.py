"""Building a run's request: the pieces of adapters/http/executor.py that are plain
functions of their arguments (headers as bytes, parsed URLs, the template context) and
the cookie-less client every call goes through."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
from pydantic import JsonValue

from adapters.http.templates import rfc3339
from domain.runs import Run
from domain.tasks import Task


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    """A run's request before authentication: rendered, with the scheduler's headers."""

    method: str
    url: str
    headers: dict[str, str]
    body: JsonValue
    webhook_id: str  # what a signed call names itself (a target call: its Idempotency-Key)
    content: bytes | None = None  # the body as JSON already (an event's): sent as is
    # `headers` split in two for the cached heads (adapters/http/heads.py): those the
    # same for every call (a plain target's; None: not known) and the call's own.
    fixed: dict[str, str] | None = None
    own: dict[str, str] = field(default_factory=dict)

    @property
    def has_body(self) -> bool:
        return self.body is not None or self.content is not None


class _NoCookies(httpx.Cookies):
    """A cookie jar that keeps nothing and adds nothing."""

    def extract_cookies(self, response: httpx.Response) -> None:
        pass

    def set_cookie_header(self, request: httpx.Request) -> None:
        pass

    def __bool__(self) -> bool:
        return False


class CookielessClient(httpx.AsyncClient):
    """httpx's client without a cookie jar: every call stands alone. A shared jar would
    send the cookies one target set with the calls of every task to the same site
    (and a dry run would not show them); it would also parse every answer for them."""

    _no_cookies = _NoCookies()

    @property
    def cookies(self) -> httpx.Cookies:
        return self._no_cookies

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        pass


# A task's fields a template does not see (the answer's Task has none of them).
_INTERNAL = {"next_fire_at", "failing", "claimed_through"}


def header_pairs(values: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    # As UTF-8 bytes: httpx would encode str values as ASCII and fail on anything else.
    return [(name.encode(), value.encode()) for name, value in values.items()]


def add_headers(headers: list[tuple[bytes, bytes]], values: Mapping[str, str]) -> None:
    """Set each of `values` (headers_env's, by validation distinct from the others)."""
    for name, value in values.items():
        set_header(headers, name.encode(), value.encode())


def set_header(
    headers: list[tuple[bytes, bytes]], name: bytes, value: bytes, *, only_if_present: bool = False
) -> None:
    """Set `name` (any case) to `value`, in the place of its first occurrence, as
    `httpx.Headers.__setitem__` does."""
    lower = name.lower()
    found = [i for i, (key, _) in enumerate(headers) if key.lower() == lower]
    if not found:
        if not only_if_present:
            headers.append((name, value))
        return
    headers[found[0]] = (name, value)
    for index in reversed(found[1:]):
        del headers[index]


def call_headers(
    headers: Mapping[str, str], extra: Mapping[str, str], authorization: str | None
) -> list[tuple[bytes, bytes]]:
    """`headers` with headers_env's (`extra`) and the Authorization header, if any."""
    pairs = header_pairs(headers)
    add_headers(pairs, extra)
    if authorization is not None:
        set_header(pairs, b"Authorization", authorization.encode())
    return pairs


@functools.lru_cache(maxsize=4096)
def parse_url(url: str) -> httpx.URL:
    """Parsed once per distinct URL (httpx.URL is immutable; parsing is most of the
    cost of building a request). An invalid URL raises httpx.InvalidURL, not cached."""
    return httpx.URL(url)


def lenient_url(url: str) -> httpx.URL:
    try:
        return httpx.URL(url)
    except httpx.InvalidURL:
        return httpx.URL("http://invalid/")


def template_context(
    task: Task, run: Run, last_run_at: datetime | None, now: datetime
) -> dict[str, Any]:
    scheduled_for = rfc3339(run.scheduled_for)
    return {
        "task": task.model_dump(mode="json", exclude=_INTERNAL),
        "run": {"id": str(run.id), "scheduled_for": scheduled_for, "manual": run.manual},
        "scheduled_for": scheduled_for,
        "now": rfc3339(now),
        "last_run": None if last_run_at is None else rfc3339(last_run_at),
    }


def _json_bytes(body: JsonValue) -> bytes:
    return body_text(body).encode()


def body_text(body: JsonValue) -> str:
    """A target's JSON body as the call sends it: compact, in the order written, any
    character as itself (the console's dry run shows this text)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def arrange(
    client_headers: list[tuple[bytes, bytes]],
    method: str,
    url: httpx.URL,
    headers: list[tuple[bytes, bytes]],
    has_body: bool,
) -> tuple[list[tuple[bytes, bytes]], bool, bool]:
    """The headers in the order `build_request` sends them, up to the body's: those of
    the client and `headers` with `Host` (and `Content-Length: 0`) first; whether the
    body's `Content-Length` and `Content-Type` follow. `headers` stay its last ones, in
    their order (adapters/http/heads.py relies on it)."""
    names = {name.lower() for name, _ in headers}
    merged = [pair for pair in client_headers if pair[0].lower() not in names]
    merged += headers
    names.update(name.lower() for name, _ in merged)
    auto = []
    if b"host" not in names and url.host:
        auto.append((b"Host", url.netloc))
    if not has_body:
        if (
            method.upper() in ("POST", "PUT", "PATCH")
            and b"content-length" not in names
            and b"transfer-encoding" not in names
        ):
            auto.append((b"Content-Length", b"0"))
        return auto + merged, False, False
    return auto + merged, b"content-length" not in names, b"content-type" not in names


def body_bytes(request: PreparedRequest) -> bytes:
    """What the request's body is on the wire (b"" for none)."""
    if request.content is not None:
        return request.content
    return b"" if request.body is None else _json_bytes(request.body)


def build_request(
    client: httpx.AsyncClient,
    request: PreparedRequest,
    headers: list[tuple[bytes, bytes]],
    timeout: float,
    sign: Callable[[str, bytes], list[tuple[bytes, bytes]]] | None = None,
) -> httpx.Request:
    """The request `AsyncClient.build_request(method, url, headers=headers,
    json=body, timeout=timeout)` builds, header for header and byte for byte: the
    client's headers, then the request's (which replace client headers of the same
    name); `Host` first, then `Content-Length: 0` for a POST, PUT or PATCH without a
    body; a JSON body's `Content-Length` and `Content-Type` last, each unless the
    request set it. Built directly, its headers normalized once instead of three
    times, without the merging of URLs, cookies and query parameters, none of which
    this client has (tests compare the two). A request's `content` is its JSON body
    made already, sent as is. `sign`'s headers (Standard Webhooks) come last, signing
    the body as sent."""
    url = parse_url(request.url)
    merged, length, json_type = arrange(
        client.headers.raw, request.method, url, headers, request.has_body
    )
    content = body_bytes(request)
    if length:
        merged.append((b"Content-Length", str(len(content)).encode("ascii")))
    if json_type:
        merged.append((b"Content-Type", b"application/json"))
    if sign is not None:
        merged += sign(request.webhook_id, content)
    return httpx.Request(
        request.method,
        url,
        headers=merged,
        stream=httpx.ByteStream(content),
        extensions={"timeout": timeouts(timeout)},
    )


def timeouts(seconds: float) -> dict[str, float]:
    """httpx's per-step timeouts: each step of a call gets the whole of `seconds`."""
    return {"connect": seconds, "read": seconds, "write": seconds, "pool": seconds}
