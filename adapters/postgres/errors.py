"""Driver errors translated at the adapter's edge."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg

from domain.errors import StoreUnavailable, TransactionCollided


@asynccontextmanager
async def translated_errors() -> AsyncIterator[None]:
    """Turn a lost or refused connection into StoreUnavailable.

    psycopg's OperationalError covers a dropped connection, a server shutting down
    (57P01), a pool that could not hand out a connection in time (PoolTimeout), a
    deadlock or serialization failure: all worth a retry. The transaction they
    interrupted was rolled back, by the server or with the connection. The last two are
    TransactionCollided, which a caller that tries again by itself (an apply) tells
    apart: the database is there, the transaction met another.
    """
    try:
        yield
    except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure) as exc:
        raise TransactionCollided("the transaction collided with another") from exc
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        raise StoreUnavailable("the database is unavailable") from exc
