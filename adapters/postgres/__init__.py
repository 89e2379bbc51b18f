"""The PostgreSQL adapter: TaskStore and Waker on psycopg 3, schema from schemata.toml."""

from adapters.postgres.initializer import initialize, initialize_sync
from adapters.postgres.pool import create_pool
from adapters.postgres.schemata import SchemataError
from adapters.postgres.store import PostgresTaskStore
from adapters.postgres.waker import PostgresWaker

__all__ = [
    "PostgresTaskStore",
    "PostgresWaker",
    "SchemataError",
    "create_pool",
    "initialize",
    "initialize_sync",
]
