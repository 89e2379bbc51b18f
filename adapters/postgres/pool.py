"""A connection pool configured the way PostgresTaskStore works best."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool


def create_pool(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    timeout: float = 5.0,
    check: bool = False,
    name: str | None = None,
) -> AsyncConnectionPool[AsyncConnection[Any]]:
    """A closed pool on `url`; the caller opens it (`await pool.open(wait=True)`) and
    closes it.

    Connections are in autocommit, so a read is one round trip; the store opens its own
    transactions. Each session's time zone is UTC, so timestamps come back with
    `timezone.utc` (the same instants as with the server's zone, and cheaper for every
    datetime operation than a `ZoneInfo`). `timeout` bounds the wait for a connection:
    past it, calls raise StoreUnavailable.

    `check` makes the pool test each connection before handing it out. It costs a round
    trip per call, and psycopg_pool spaces repeated failed checks by a doubling delay
    from one second, so after a server restart the first caller may wait seconds. Without
    it (the default), a connection that died while idle fails once: the store retries a
    read on another connection by itself, and a write raises StoreUnavailable, which the
    caller may retry.
    """
    return AsyncConnectionPool(
        url,
        open=False,
        min_size=min_size,
        max_size=max_size,
        timeout=timeout,
        name=name,
        kwargs={"autocommit": True},
        check=AsyncConnectionPool.check_connection if check else None,
        configure=_configure,
    )


async def _configure(conn: AsyncConnection[Any]) -> None:
    await conn.execute("SET TIME ZONE 'UTC'")
