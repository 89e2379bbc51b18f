"""The bounds every use case checks its arguments against: page sizes, how many fire
times one asks for, instants UTC can hold."""

from __future__ import annotations

from datetime import datetime

from domain.errors import InvalidRequest
from domain.instants import truncate

MAX_PAGE = 500
MAX_FIRE_TIMES = 100


def check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidRequest("limit", f"must be between 1 and {MAX_PAGE}")


def check_count(count: int) -> None:
    if not 1 <= count <= MAX_FIRE_TIMES:
        raise InvalidRequest("count", f"must be between 1 and {MAX_FIRE_TIMES}")


def in_range(field: str, instant: datetime) -> datetime:
    """`instant` in whole UTC seconds. Raises InvalidRequest naming `field` when it has
    no UTC offset, or when its UTC reading falls outside the years datetime can hold
    (year 1 with a positive offset)."""
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise InvalidRequest(field, "must carry a UTC offset (e.g. Z or +01:00)")
    try:
        return truncate(instant)
    except OverflowError:
        raise InvalidRequest(field, "is out of range once read in UTC") from None
