"""How an attempt went wrong, in words a person can act on, and whether to retry it."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from urllib.parse import quote, quote_plus

import httpx

from adapters.http.guard import OutboundDenied, ResolutionFailed


@dataclass(frozen=True, slots=True)
class Failure:
    message: str
    retryable: bool


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _where(url: httpx.URL) -> str:
    return f"{url.host}:{url.port or (443 if url.scheme == 'https' else 80)}"


def format_seconds(seconds: float) -> str:
    return f"{seconds:g}s"


def describe(exc: Exception, url: httpx.URL, timeout: float) -> Failure:
    """Translate an exception raised by one call into a Failure. Connection errors
    (DNS, refused, reset, TLS) and timeouts are retryable; the guard's refusal and a
    request httpx cannot send are not."""
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return Failure(f"timed out after {format_seconds(timeout)}", True)
    causes = list(_chain(exc))
    for cause in causes:
        if isinstance(cause, OutboundDenied):
            return Failure(str(cause), False)
        if isinstance(cause, ResolutionFailed):
            return Failure(str(cause), True)
    if isinstance(exc, httpx.ConnectError):
        tls = next((c for c in causes if isinstance(c, ssl.SSLError)), None)
        if tls is not None:
            return Failure(f"TLS error connecting to {_where(url)}: {_tls_reason(tls)}", True)
        if any(isinstance(c, ConnectionRefusedError) for c in causes) or "refused" in str(exc):
            return Failure(f"connection refused by {_where(url)}", True)
        return Failure(f"could not connect to {_where(url)}: {_text(exc)}", True)
    if isinstance(exc, httpx.TransportError) and not isinstance(
        exc, httpx.UnsupportedProtocol | httpx.LocalProtocolError
    ):
        return Failure(f"connection to {_where(url)} failed: {_text(exc)}", True)
    if isinstance(exc, httpx.HTTPError | httpx.InvalidURL):
        return Failure(f"request could not be sent: {_text(exc)}", False)
    return Failure(f"unexpected error: {type(exc).__name__}: {_text(exc)}", False)


def _tls_reason(exc: ssl.SSLError) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
        return f"certificate verify failed: {exc.verify_message}"
    return exc.reason or str(exc)


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After as seconds: a number of seconds or an HTTP-date (RFC 9110 10.2.3)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    now = now or datetime.now(timezone.utc)
    return max(0.0, (when - now).total_seconds())


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of each secret replaced by "***": as it is, and as
    the usual escapes write it, since a target that echoes a request back writes it as
    JSON (quotes, backslashes and non-ASCII escaped, `/` too by some) and a library's
    error may quote it as Python's repr does."""
    forms = {form for secret in secrets if secret for form in _written_forms(secret)}
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, "***")
    return text


def _written_forms(secret: str) -> set[str]:
    forms = set()
    # A header's bytes read back as Latin-1, as HTTP/1.1 servers decode them: a
    # non-ASCII secret sent as UTF-8 comes back as two characters for each of its own.
    for text in {secret, secret.encode().decode("latin-1")}:
        as_json = json.dumps(text)[1:-1]
        as_unicode_json = json.dumps(text, ensure_ascii=False)[1:-1]
        forms |= {
            text,
            as_json,
            as_unicode_json,
            as_json.replace("/", "\\/"),
            as_unicode_json.replace("/", "\\/"),
            repr(text)[1:-1],
            repr(text.encode())[2:-1],
            # Echoed in a query string or a form: percent-encoded (`+` and `/` of a
            # base64 signature or token included).
            quote(text, safe=""),
            quote_plus(text, safe=""),
        }
    return {form for form in forms if form}


def _window(limit: int, secrets: list[str]) -> int:
    """How much of a body to read: `limit` bytes and enough past it that a secret
    crossing the cut is still recognised."""
    forms = (form for secret in secrets for form in _written_forms(secret))
    return limit + max((len(form.encode()) for form in forms), default=0)


async def read_excerpt(body: AsyncIterable[bytes], limit: int, secrets: Iterable[str]) -> str:
    """The first `limit` bytes of `body` (decoded as sent: without a Content-Encoding,
    or by `httpx.Response.aiter_bytes`), decoded leniently (UTF-8, bad bytes and NUL
    replaced, since PostgreSQL text holds no NUL), with secrets scrubbed. Reads only a
    little past `limit`: enough that a secret crossing the cut is still recognised."""
    secrets = [s for s in secrets if s]
    window = _window(limit, secrets)
    data = bytearray()
    if window:
        async for chunk in body:
            data += chunk
            if len(data) >= window:
                break
    return excerpt(bytes(data), limit, secrets)


def excerpt(body: bytes, limit: int, secrets: Iterable[str]) -> str:
    """`read_excerpt` of a body at hand."""
    secrets = [s for s in secrets if s]
    text = scrub(body[: _window(limit, secrets)].decode("utf-8", errors="replace"), secrets)
    text = text.encode("utf-8")[:limit].decode("utf-8", errors="replace")
    return text.replace("\x00", "\ufffd")
