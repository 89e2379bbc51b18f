"""The schema `bench/claim.py` measures in (and `bench/wal.py` borrows): N due tasks
made at once, every one due again between settings, and the schema dropped at the end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from adapters.postgres import initialize
from domain.tasks import HttpTarget
from domain.triggers import IntervalTrigger

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(seconds=5)  # every task of the schema is due


async def fill(conn: psycopg.AsyncConnection, schema: str, count: int) -> None:
    trigger = IntervalTrigger(every=3600, anchor=T0).model_dump(mode="json")
    target = HttpTarget(url="http://127.0.0.1:9/hook").model_dump(mode="json")
    await conn.execute(
        sql.SQL(
            "INSERT INTO {}.tasks (id, name, trigger, target, misfire_grace_seconds,"
            " created_at, updated_at) SELECT gen_random_uuid(), 'bench-' || i, %s,"
            " jsonb_set(%s, ARRAY['url'], to_jsonb(%s || i)), 60, %s, %s"
            " FROM generate_series(1, %s) AS i"
        ).format(sql.Identifier(schema)),
        [Jsonb(trigger), Jsonb(target), f"{target['url']}/", T0, T0, count],
    )


async def reset(conn: psycopg.AsyncConnection, schema: str) -> None:
    """Every task due again, no runs, no leases, no dead rows."""
    name = sql.Identifier(schema)
    await conn.execute(
        sql.SQL(
            "UPDATE {}.tasks SET next_fire_at = %s, next_run_at = %s, last_run_at = NULL"
        ).format(name),
        [T0, T0],
    )
    await conn.execute(sql.SQL("TRUNCATE {}.runs, {}.run_leases").format(name, name))
    for table in ("tasks", "runs", "run_leases"):
        await conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(schema, table)))


async def prepare(url: str, schema: str, count: int) -> None:
    await initialize(url, schema)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await fill(conn, schema, count)


async def again(url: str, schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await reset(conn, schema)


async def drop(url: str, schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )
