"""Create or upgrade the database from `schemata.toml`.

Under an advisory lock (so initializers started together run one after the other), it
reads the catalog and issues, with `IF NOT EXISTS`, only what is missing: the schema,
tables (with their keys), columns added since (`ADD COLUMN IF NOT EXISTS`), foreign
keys, indexes, and the partitions of partitioned tables (the current period's and the
next: adapters/postgres/partitions.py). A second run finds nothing to do and takes no
table lock. Every
statement is composed with `psycopg.sql`; the SQL fragments the toml holds (types,
defaults, index predicates) were checked against narrow patterns by `schemata`.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from psycopg import AsyncConnection, sql

from adapters.postgres.errors import translated_errors
from adapters.postgres.liveness import with_liveness
from adapters.postgres.partitions import create_parent, ensure_partitions, partition_existing
from adapters.postgres.queries import load_queries, spec_state
from adapters.postgres.schemata import ForeignKey, Index, Table, read_schemata

_ON_DELETE = {
    "cascade": sql.SQL("CASCADE"),
    "restrict": sql.SQL("RESTRICT"),
    "no action": sql.SQL("NO ACTION"),
    "set null": sql.SQL("SET NULL"),
}
_METHODS = {name: sql.SQL(name) for name in ("btree", "gin", "gist", "hash", "brin")}


@dataclass(slots=True)
class Catalog:
    """What the schema already holds."""

    schema_exists: bool = False
    relations: set[str] = field(default_factory=set)  # tables and indexes
    kinds: dict[str, str] = field(default_factory=dict)  # relkind: 'r' table, 'p' partitioned
    columns: dict[str, set[str]] = field(default_factory=dict)
    constraints: set[str] = field(default_factory=set)


async def initialize(
    target: str | AsyncConnection[Any], schema: str = "scheduler", *, path: Path | None = None
) -> list[str]:
    """Create or upgrade `schema` from `schemata.toml` (or `path`); return the statements
    it ran, empty when everything was there. `target` is a conninfo/URL or an open
    connection. Raises SchemataError for a malformed file, StoreUnavailable when the
    server cannot be reached."""
    tables = read_schemata(path)
    async with translated_errors():
        if isinstance(target, str):
            conninfo = with_liveness(target)  # a vanished server fails it, never hangs it
            async with await AsyncConnection.connect(conninfo, autocommit=True) as conn:
                return await _initialize(conn, schema, tables)
        return await _initialize(target, schema, tables)


def initialize_sync(
    conninfo: str, schema: str = "scheduler", *, path: Path | None = None
) -> list[str]:
    """`initialize` for synchronous callers such as `imbi-scheduler init-db`."""
    return asyncio.run(initialize(conninfo, schema, path=path))


def schema_lock_key(schema: str) -> int:
    digest = hashlib.blake2b(f"{schema}:initializer".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


async def _initialize(conn: AsyncConnection[Any], schema: str, tables: list[Table]) -> list[str]:
    queries = load_queries()
    now = datetime.now(UTC)
    async with conn.transaction():
        await conn.execute(queries["lock_schema"], {"key": schema_lock_key(schema)})
        catalog = await read_catalog(conn, schema)
        statements = plan(schema, tables, catalog)
        for statement in statements:
            await conn.execute(statement)
        # A table declared partitioned that is not yet (an older database) becomes so,
        # its columns brought up to date first; then what it lacks as a partitioned table.
        upgrades = [t for t in tables if t.partitions and catalog.kinds.get(t.name) == "r"]
        for table in upgrades:
            statements += await partition_existing(conn, schema, table, _body(schema, table), now)
        if upgrades:
            more = plan(schema, tables, await read_catalog(conn, schema))
            for statement in more:
                await conn.execute(statement)
            statements += more
        if "tasks" in catalog.relations and "task_history" not in catalog.relations:
            statements.append(_first_versions(schema))
            await conn.execute(statements[-1])
        for table in tables:
            if table.partitions is not None:
                statements += await ensure_partitions(conn, schema, table, now)
    return [statement.as_string(conn) for statement in statements]


def _first_versions(schema: str) -> sql.Composed:
    """A database from before task history: each task gets one version, its definition
    as it is now, dated from its creation (what it was before is not known), so that
    explain finds a version in force over the task's life and the next change is
    recorded against it (docs/storage.md, "The initializer")."""
    return sql.SQL(
        "INSERT INTO {history} (task_id, version, at, actor, cause, changes, state)"
        " SELECT t.id, t.version, t.created_at, NULL, 'api', '{{}}'::jsonb, {state}"
        " FROM {tasks} AS t"
    ).format(
        history=sql.Identifier(schema, "task_history"),
        tasks=sql.Identifier(schema, "tasks"),
        state=spec_state("t"),
    )


async def read_catalog(conn: AsyncConnection[Any], schema: str) -> Catalog:
    queries = load_queries()
    params = {"schema": schema}
    catalog = Catalog()
    cur = await conn.execute("SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %s", [schema])
    catalog.schema_exists = await cur.fetchone() is not None
    cur = await conn.execute(queries["existing_relations"], params)
    catalog.kinds = dict(await cur.fetchall())
    catalog.relations = set(catalog.kinds)
    cur = await conn.execute(queries["existing_columns"], params)
    for table, column in await cur.fetchall():
        catalog.columns.setdefault(table, set()).add(column)
    cur = await conn.execute(queries["existing_constraints"], params)
    catalog.constraints = {name for (name,) in await cur.fetchall()}
    return catalog


def plan(schema: str, tables: list[Table], catalog: Catalog) -> list[sql.Composed]:
    """The statements that bring `catalog` up to `tables`, in order."""
    name = sql.Identifier(schema)
    statements: list[sql.Composed] = []
    if not catalog.schema_exists:
        statements.append(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
    for table in tables:
        qualified = sql.Identifier(schema, table.name)
        if table.name not in catalog.relations:
            statements += _create_table(schema, table)
        else:
            present = catalog.columns.get(table.name, set())
            for column in table.columns:
                if column.name not in present:
                    statements.append(
                        sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} {}").format(
                            qualified, sql.Identifier(column.name), _fragment(column.definition)
                        )
                    )
            for constraint in _constraints(schema, table):
                if constraint[0] not in catalog.constraints:
                    statements.append(
                        sql.SQL("ALTER TABLE {} ADD {}").format(qualified, constraint[1])
                    )
        for index in table.indexes:
            if index.name not in catalog.relations:
                statements.append(_create_index(schema, table.name, index))
    return statements


def _create_table(schema: str, table: Table) -> list[sql.Composed]:
    if table.partitions is not None:
        return create_parent(schema, table, _body(schema, table))
    return [
        sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(
            sql.Identifier(schema, table.name), _body(schema, table)
        )
    ]


def _body(schema: str, table: Table) -> sql.Composed:
    """A table's columns and keys, as CREATE TABLE lists them."""
    items = [
        sql.SQL("{} {}").format(sql.Identifier(c.name), _fragment(c.definition))
        for c in table.columns
    ]
    items += [definition for _name, definition in _constraints(schema, table)]
    return sql.SQL(", ").join(items)


def _constraints(schema: str, table: Table) -> list[tuple[str, sql.Composed]]:
    """(name, `CONSTRAINT name ...`) of the table's primary and foreign keys."""
    primary = f"{table.name}_pkey"
    found = [
        (
            primary,
            sql.SQL("CONSTRAINT {} PRIMARY KEY ({})").format(
                sql.Identifier(primary), _identifiers(table.primary_key)
            ),
        )
    ]
    found += [(fk.name, _foreign_key(schema, fk)) for fk in table.foreign_keys]
    return found


def _foreign_key(schema: str, fk: ForeignKey) -> sql.Composed:
    return sql.SQL("CONSTRAINT {} FOREIGN KEY ({}) REFERENCES {} ({}) ON DELETE {}").format(
        sql.Identifier(fk.name),
        _identifiers(fk.columns),
        sql.Identifier(schema, fk.table),
        _identifiers(fk.references),
        _ON_DELETE[fk.on_delete],
    )


def _create_index(schema: str, table: str, index: Index) -> sql.Composed:
    columns = sql.SQL(", ").join(
        sql.Identifier(c.name) + sql.SQL(" DESC") if c.descending else sql.Identifier(c.name)
        for c in index.columns
    )
    statement = sql.SQL("CREATE {}INDEX IF NOT EXISTS {} ON {} USING {} ({})").format(
        sql.SQL("UNIQUE ") if index.unique else sql.SQL(""),
        sql.Identifier(index.name),
        sql.Identifier(schema, table),
        _METHODS[index.using],
        columns,
    )
    if index.where is not None:
        statement += sql.SQL(" WHERE {}").format(_fragment(index.where))
    return statement


def _identifiers(names: tuple[str, ...]) -> sql.Composed:
    return sql.SQL(", ").join(map(sql.Identifier, names))


def _fragment(text: str) -> sql.SQL:
    # Validated by adapters.postgres.schemata against a narrow pattern (types, literal
    # defaults, simple predicates): SQL text from the package's own file, not from input.
    return sql.SQL(text)
