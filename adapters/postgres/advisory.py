"""The advisory locks of a schema (`pg_advisory_xact_lock`, held to the end of the
transaction): their keys, the same on every replica and distinct per schema, each a
signed 64-bit integer."""

from __future__ import annotations

import hashlib
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

_TAKE = "SELECT pg_advisory_xact_lock(%(key)s::bigint)"
_TAKE_SHARED = "SELECT pg_advisory_xact_lock_shared(key) FROM unnest(%(keys)s::bigint[]) AS key"


def _key(text: str) -> int:
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def lease_lock_key(schema: str, task_id: UUID) -> int:
    """The key under which a task's leases are counted and taken."""
    return _key(f"{schema}:lease:{task_id}")


def hold_lock_key(schema: str) -> int:
    """The key an apply's hold takes, one hold at a time (docs/storage.md, "An apply's
    hold")."""
    return _key(f"{schema}:apply-hold")


def calendar_lock_key(schema: str, name: str) -> int:
    """The key of a calendar's turns (adapters.postgres.calendars,
    `take_calendar_turns`)."""
    return _key(f"{schema}:calendar:{name}")


async def take_lock(conn: AsyncConnection[Any], key: int) -> None:
    """Wait for the lock `key`, exclusive, in the caller's transaction."""
    await conn.execute(_TAKE, {"key": key})


async def take_shared_locks(conn: AsyncConnection[Any], keys: list[int]) -> None:
    """Wait for the locks `keys`, shared, in the order given, in the caller's
    transaction."""
    await conn.execute(_TAKE_SHARED, {"keys": keys})


async def take_hold_lock(conn: AsyncConnection[Any], schema: str) -> None:
    """Wait for the hold lock in the caller's transaction."""
    await take_lock(conn, hold_lock_key(schema))
