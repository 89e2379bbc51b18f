"""Opaque cursors: a keyset position plus the filters of the listing it belongs to."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from domain.errors import InvalidRequest
from domain.validation import nul_at

T = TypeVar("T")


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
