"""A resource named by reference: its id (a UUID) or, failing that, its name."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar
from uuid import UUID

T = TypeVar("T")


def as_uuid(ref: str | UUID) -> UUID | None:
    """`ref` as an id, or None when it is not one (then it is a name)."""
    if isinstance(ref, UUID):
        return ref
    try:
        return UUID(ref)
    except ValueError:
        return None


async def by_id_or_name(
    ref: str | UUID,
    by_id: Callable[[UUID], Awaitable[T]],
    by_name: Callable[[str], Awaitable[T]],
    missing: type[Exception],
) -> T:
    """What `ref` names: the item with that id or, when `ref` is no id or no item has it
    (`by_id` raised `missing`), the item of that name (`by_name` raises `missing`)."""
    item_id = as_uuid(ref)
    if item_id is not None:
        try:
            return await by_id(item_id)
        except missing:
            pass
    return await by_name(str(ref))
