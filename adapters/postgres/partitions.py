"""Range partitions by time, as `schemata.toml` declares them (`partitions`): which a
table has, making the current and the next ones ready, and turning a table that is not
partitioned yet into one without losing a row (docs/storage.md, "Partitions").

A partitioned table always has a default partition, `<table>_default`, for rows that no
range covers (a backfill of long ago, a clock far off), so that no write ever fails for
want of a partition. Each range partition is `<table>_pYYYYMMDD`, from that day 00:00
UTC for `days` days; the days are counted from Monday 1970-01-05, so weekly partitions
start on Mondays. A table that was upgraded keeps its old rows in `<table>_before_YYYYMMDD`,
the range up to that day.

The DDL here runs inside a transaction that holds the schema's initializer lock, so two
replicas (or a replica and `init-db`) never make the same partition twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import AsyncConnection, sql

from adapters.postgres.queries import load_queries
from adapters.postgres.schemata import Table

EPOCH = datetime(1970, 1, 5, tzinfo=UTC)  # a Monday


@dataclass(frozen=True, slots=True)
class Partition:
    """One partition and the range it holds; `lower` None: from the start of time,
    `upper` None: to its end; both None with `default`: whatever no range holds."""

    name: str
    lower: datetime | None
    upper: datetime | None
    default: bool = False

    def overlaps(self, lower: datetime, upper: datetime) -> bool:
        if self.default:
            return False
        return (self.lower is None or self.lower < upper) and (
            self.upper is None or lower < self.upper
        )


def partition_start(at: datetime, days: int) -> datetime:
    """The start of the partition of `days` days that holds `at`."""
    period = timedelta(days=days)
    return EPOCH + ((at - EPOCH) // period) * period


def range_name(table: str, lower: datetime) -> str:
    return f"{table}_p{lower.astimezone(UTC):%Y%m%d}"


def default_name(table: str) -> str:
    return f"{table}_default"


def legacy_name(table: str, upper: datetime) -> str:
    return f"{table}_before_{upper.astimezone(UTC):%Y%m%d}"


async def existing_partitions(
    conn: AsyncConnection[Any], schema: str, table: str
) -> list[Partition]:
    """The partitions of `schema.table`, by their ranges' starts (the default last)."""
    cur = await conn.execute(load_queries()["partitions_of"], {"schema": schema, "table": table})
    found = [
        Partition(name, lower, upper, default)
        for name, lower, upper, default in await cur.fetchall()
    ]
    return sorted(found, key=lambda p: (p.default, p.lower or datetime.min.replace(tzinfo=UTC)))


def create_parent(schema: str, table: Table, body: sql.Composable) -> list[sql.Composed]:
    """A partitioned table with `body` (its columns and keys) and its default partition."""
    assert table.partitions is not None
    return [
        sql.SQL("CREATE TABLE IF NOT EXISTS {} ({}) PARTITION BY RANGE ({})").format(
            sql.Identifier(schema, table.name), body, sql.Identifier(table.partitions.column)
        ),
        _create_default(schema, table.name),
    ]


def _create_default(schema: str, table: str) -> sql.Composed:
    return sql.SQL("CREATE TABLE IF NOT EXISTS {} PARTITION OF {} DEFAULT").format(
        sql.Identifier(schema, default_name(table)), sql.Identifier(schema, table)
    )


async def ensure_partitions(
    conn: AsyncConnection[Any], schema: str, table: Table, now: datetime
) -> list[sql.Composed]:
    """Make the partitions of the range holding `now` and of the `ahead` ranges after it,
    where no partition covers them yet; return the statements run. A range whose rows
    the default partition already holds is left to it (none are moved, see
    `_default_holds`)."""
    partitioning = table.partitions
    assert partitioning is not None
    existing = await existing_partitions(conn, schema, table.name)
    statements: list[sql.Composed] = []
    if not any(p.default for p in existing):
        statements.append(_create_default(schema, table.name))
        await conn.execute(statements[-1])
    start = partition_start(now, partitioning.days)
    period = timedelta(days=partitioning.days)
    locked = False
    for k in range(partitioning.ahead + 1):
        lower = start + k * period
        upper = lower + period
        if any(p.overlaps(lower, upper) for p in existing):
            continue
        if not locked:
            # CREATE TABLE ... PARTITION OF would lock the whole table against every
            # read and write; ATTACH PARTITION locks it only against other DDL. The
            # default partition is locked first, so that no row for the range lands
            # there between the look below and the ATTACH (which would then fail).
            default = sql.Identifier(schema, default_name(table.name))
            statements.append(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(default))
            await conn.execute(statements[-1])
            locked = True
        if await _default_holds(conn, schema, table.name, partitioning.column, lower, upper):
            continue
        for statement in _create_range(schema, table, lower, upper):
            statements.append(statement)
            await conn.execute(statement)
    return statements


async def _default_holds(
    conn: AsyncConnection[Any],
    schema: str,
    table: str,
    column: str,
    lower: datetime,
    upper: datetime,
) -> bool:
    """Whether the default partition holds rows of the range [lower, upper). Such a range
    stays there: moving them into a new partition took its locks for as long as the
    move, and reads meanwhile saw the rows in neither place (a read fixes the partitions
    it scans before it waits for the lock, and its snapshot after the move)."""
    query = sql.SQL(
        "SELECT EXISTS (SELECT 1 FROM {} WHERE {column} >= %(lower)s AND {column} < %(upper)s)"
    ).format(sql.Identifier(schema, default_name(table)), column=sql.Identifier(column))
    cur = await conn.execute(query, {"lower": lower, "upper": upper})
    row = await cur.fetchone()
    return bool(row and row[0])


def _create_range(
    schema: str, table: Table, lower: datetime, upper: datetime
) -> list[sql.Composed]:
    """A range partition, made apart and then attached (with the default partition
    locked by the caller)."""
    parent = sql.Identifier(schema, table.name)
    part = sql.Identifier(schema, range_name(table.name, lower))
    return [
        sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS)").format(part, parent),
        sql.SQL("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES FROM ({}) TO ({})").format(
            parent, part, sql.Literal(lower), sql.Literal(upper)
        ),
    ]


async def partition_existing(
    conn: AsyncConnection[Any], schema: str, table: Table, body: sql.Composable, now: datetime
) -> list[sql.Composed]:
    """Turn `schema.table`, not partitioned yet, into a partitioned table whose first
    partition is the old table with every row it holds: the range up to the end of the
    partition period holding the later of `now` and its newest row. Its indexes become
    the new table's (the ones of the same definition are attached, not built again);
    the primary key, which now includes the partition column, is built once."""
    partitioning = table.partitions
    assert partitioning is not None
    parent = sql.Identifier(schema, table.name)
    column = sql.Identifier(partitioning.column)
    await conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(parent))
    cur = await conn.execute(sql.SQL("SELECT max({}) FROM {}").format(column, parent))
    row = await cur.fetchone()
    newest = max(now, row[0]) if row and row[0] is not None else now
    upper = partition_start(newest, partitioning.days) + timedelta(days=partitioning.days)
    legacy = legacy_name(table.name, upper)
    statements = [
        # The check lets ATTACH skip its scan; its own scan is the upgrade's one pass.
        sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} CHECK ({} < {})").format(
            parent, sql.Identifier(f"{legacy}_bound"), column, sql.Literal(upper)
        ),
        # The new table's key includes the partition column; ATTACH builds it here.
        sql.SQL("ALTER TABLE {} DROP CONSTRAINT IF EXISTS {}").format(
            parent, sql.Identifier(f"{table.name}_pkey")
        ),
    ]
    for statement in statements:
        await conn.execute(statement)
    cur = await conn.execute(load_queries()["indexes_of"], {"schema": schema, "table": table.name})
    indexes = [name for (name,) in await cur.fetchall()]
    more = [
        sql.SQL("ALTER TABLE {} RENAME TO {}").format(parent, sql.Identifier(legacy)),
        *(
            sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                sql.Identifier(schema, index), sql.Identifier(f"{index}_{upper:%Y%m%d}"[:63])
            )
            for index in indexes
        ),
        *create_parent(schema, table, body),
        sql.SQL("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES FROM (MINVALUE) TO ({})").format(
            parent, sql.Identifier(schema, legacy), sql.Literal(upper)
        ),
    ]
    for statement in more:
        await conn.execute(statement)
    return statements + more
