"""Opaque cursors: a keyset position plus the filters of the listing it belongs to.

Every listing reads one item more than its page holds (`limit + 1`): `page_of` keeps the
page and, when there was more, issues the cursor after its last item; `read_cursor`
reads a cursor back or answers 422 naming `cursor`; `instant_key`/`read_instant_key`
are the (instant, id) keyset position of tasks, runs and events.

A cursor is `<payload>.<check>`, both unpadded base64url: the payload is JSON naming the
list that issued it (`"list"`: its kind and scope, such as `runs of task <id>`) beside
the listing's own position and filters; the check is a BLAKE2b digest (12 bytes) of the
payload keyed with `CURSOR_KEY`. The key is fixed and documented (docs/api.md), not a
secret: the check tells a cursor edited by hand, or cut short, from one this service
issued, and needs nothing shared between replicas; it is no security boundary (what a
cursor carries is the caller's own filters). A cursor that fails the check, or that
another list issued, is a 422 on `cursor`."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
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

# The key of every cursor's check: fixed, documented, not a secret (see the docstring).
CURSOR_KEY = b"imbi-scheduler cursor v1"
_DIGEST_BYTES = 12
_NOT_ISSUED = "is not a cursor this service issued: pass `next_cursor` as it was answered"


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None


def encode_cursor(listing: str, payload: dict[str, Any]) -> str:
    """The cursor of `payload` for the list `listing` (its kind and scope, as
    `"runs of task <id>"`), with its check."""
    raw = json.dumps({**payload, "list": listing}, separators=(",", ":"), sort_keys=True)
    data = raw.encode()
    return f"{_b64(data)}.{_b64(_check(data))}"


def decode_cursor(cursor: str, listing: str) -> dict[str, Any]:
    """The payload of a cursor the list `listing` issued, without its `"list"`. Raises
    InvalidRequest("cursor") for anything else: not a cursor, edited (the check fails),
    or issued by another list."""
    if not cursor:
        raise InvalidRequest(
            "cursor", "is empty: leave `cursor` out for the first page, then pass `next_cursor`"
        )
    data_part, dot, check_part = cursor.partition(".")
    try:
        if not dot:
            raise ValueError("no check")
        data, check = _unb64(data_part), _unb64(check_part)
    except (ValueError, binascii.Error):
        raise InvalidRequest("cursor", _NOT_ISSUED) from None
    if not hmac.compare_digest(check, _check(data)):
        raise InvalidRequest(
            "cursor",
            "was edited or is not a cursor this service issued (its check fails): "
            "pass `next_cursor` as it was answered",
        )
    try:
        payload = json.loads(data)
        # The key that signs cursors is no secret (a check against mistakes, not forgery):
        # a forged one may hold what no issued one does, a lone surrogate, which the
        # database cannot take.
        json.dumps(payload, ensure_ascii=False).encode()
    except (ValueError, UnicodeError, RecursionError):
        raise InvalidRequest("cursor", _NOT_ISSUED) from None
    if not isinstance(payload, dict) or nul_at(payload) is not None:
        raise InvalidRequest("cursor", _NOT_ISSUED)
    issued_by = payload.pop("list", None)
    if issued_by != listing:
        raise InvalidRequest(
            "cursor",
            f"was issued by another list ({issued_by}), not by this one ({listing})",
        )
    return payload


def page_of(
    found: list[T], limit: int, listing: str, cursor_of: Callable[[T], dict[str, Any]]
) -> Page[T]:
    """The page of `found` (read with `limit + 1`): its first `limit` items and, when there
    was one more, the cursor of `listing` whose payload `cursor_of` makes from the last
    item kept."""
    if len(found) <= limit:
        return Page(found, None)
    kept = found[:limit]
    return Page(kept, encode_cursor(listing, cursor_of(kept[-1])))


def read_cursor(cursor: str, listing: str, read: Callable[[dict[str, Any]], R]) -> R:
    """What `read` makes of the payload of a cursor `listing` issued; a payload it cannot
    read (KeyError, TypeError, ValueError, IndexError) is InvalidRequest("cursor")."""
    payload = decode_cursor(cursor, listing)
    try:
        return read(payload)
    except (KeyError, TypeError, ValueError, IndexError):
        raise InvalidRequest("cursor", f"is not a cursor of {listing}") from None


def same_filters(sent: dict[str, Any], carried: dict[str, Any]) -> None:
    """Refuse a filter sent beside a cursor that is not the one the cursor carries (each
    by its query parameter's name; None: not sent), rather than list by the cursor's
    while the caller believes it asked for another. Raises InvalidRequest naming it."""
    for name, value in sent.items():
        if value is not None and value != carried[name]:
            raise InvalidRequest(
                name,
                f"is {_shown(value)} but the cursor was issued for {_shown(carried[name])}: "
                "a cursor carries the filters of its first page; send it with the same "
                "filters or none, or leave `cursor` out to list with new ones",
            )


def _shown(value: object) -> str:
    if value is None:
        return "no filter"
    if isinstance(value, datetime):
        return repr(value.isoformat())
    if isinstance(value, UUID):
        return repr(str(value))
    return repr(getattr(value, "value", value))


def instant_key(instant: datetime, item_id: UUID) -> list[str]:
    """A keyset position (instant, id) as a cursor carries it."""
    return [instant.isoformat(), str(item_id)]


def read_instant_key(key: Any) -> tuple[datetime, UUID]:
    """The (instant, id) of `instant_key`. Raises TypeError or ValueError."""
    instant, item_id = key
    return read_instant(instant), read_uuid(item_id)


def read_instant(value: object) -> datetime:
    """An instant a cursor carries (ISO 8601 text with an offset). Raises TypeError for
    another type, ValueError for other text: a cursor's contents are the client's."""
    if not isinstance(value, str):
        raise TypeError("an instant is text")
    instant = datetime.fromisoformat(value)
    if instant.utcoffset() is None:
        raise ValueError("an instant has an offset")
    return instant


def read_text(value: object) -> str:
    """Text a cursor carries. Raises TypeError for another type."""
    if not isinstance(value, str):
        raise TypeError("not text")
    return value


def read_uuid(value: object) -> UUID:
    """An id a cursor carries. Raises TypeError for another type than text (`UUID(5)`
    raises AttributeError), ValueError for text that is not an id."""
    if not isinstance(value, str):
        raise TypeError("an id is text")
    return UUID(value)


def _check(data: bytes) -> bytes:
    return hashlib.blake2b(data, key=CURSOR_KEY, digest_size=_DIGEST_BYTES).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    """The bytes `_b64` made `text` of, and no other spelling of them. Raises ValueError
    or binascii.Error."""
    data = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    if _b64(data) != text:
        raise ValueError("not base64url as this service writes it")
    return data
