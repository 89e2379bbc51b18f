"""Driver errors translated at the adapter's edge."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg

from domain.errors import StoreUnavailable


@asynccontextmanager
async def translated_errors() -> AsyncIterator[None]:
    """Turn a lost or refused connection into StoreUnavailable.

    psycopg's OperationalError covers a dropped connection, a server shutting down
    (57P01), a pool that could not hand out a connection in time (PoolTimeout), a
    deadlock or serialization failure: all worth a retry. The transaction they
    interrupted was rolled back, by the server or with the connection.
    """
    try:
        yield
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        raise StoreUnavailable("the database is unavailable") from exc
