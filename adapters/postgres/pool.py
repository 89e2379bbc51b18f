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
    check: bool = True,
    name: str | None = None,
) -> AsyncConnectionPool[AsyncConnection[Any]]:
    """A closed pool on `url`; the caller opens it (`await pool.open(wait=True)`) and
    closes it.

    Connections are in autocommit, so a read is one round trip; the store opens its own
    transactions. With `check`, a connection that died while idle in the pool (server
    restart, terminated backend) is replaced before use instead of failing one call.
    `timeout` bounds the wait for a connection: past it, calls raise StoreUnavailable.
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
    )
