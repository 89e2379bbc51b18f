"""Opaque cursors: a keyset position plus the filters of the listing it belongs to.

Every listing reads one item more than its page holds (`limit + 1`): `page_of` keeps the
page and, when there was more, issues the cursor after its last item; `read_cursor`
reads a cursor back or answers 422 naming `cursor`; `instant_key`/`read_instant_key`
are the (instant, id) keyset position of tasks, runs and events."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar
from uuid import UUID

from domain.errors import InvalidRequest
from domain.validation import nul_at

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None


def encode_cursor(payload: dict[str, Any]) -> str:
    raw = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> dict[str, Any]:
    """The payload of a cursor this service issued. Raises InvalidRequest("cursor")."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        payload = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidRequest("cursor", "is not a cursor this service issued") from None
    if not isinstance(payload, dict) or nul_at(payload) is not None:
        raise InvalidRequest("cursor", "is not a cursor this service issued")
    return payload


def page_of(found: list[T], limit: int, cursor_of: Callable[[T], dict[str, Any]]) -> Page[T]:
    """The page of `found` (read with `limit + 1`): its first `limit` items and, when there
    was one more, the cursor whose payload `cursor_of` makes from the last item kept."""
    if len(found) <= limit:
        return Page(found, None)
    kept = found[:limit]
    return Page(kept, encode_cursor(cursor_of(kept[-1])))


def read_cursor(cursor: str, what: str, read: Callable[[dict[str, Any]], R]) -> R:
    """What `read` makes of a cursor's payload; a payload it cannot read (KeyError,
    TypeError, ValueError) is InvalidRequest("cursor", f"is not {what}")."""
    payload = decode_cursor(cursor)
    try:
        return read(payload)
    except (KeyError, TypeError, ValueError):
        raise InvalidRequest("cursor", f"is not {what}") from None


def instant_key(instant: datetime, item_id: UUID) -> list[str]:
    """A keyset position (instant, id) as a cursor carries it."""
    return [instant.isoformat(), str(item_id)]


def read_instant_key(key: Any) -> tuple[datetime, UUID]:
    """The (instant, id) of `instant_key`. Raises TypeError or ValueError."""
    instant, item_id = key
    return datetime.fromisoformat(instant), UUID(item_id)
