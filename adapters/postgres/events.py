"""The outbox on PostgreSQL: the `events` table (schemata.toml) and the EventStore port.

Two halves. `write_events` is called by `PostgresTaskStore` inside the transaction that
records a cause (a claim, a finish, a lost run), so an event exists exactly when its
cause was committed. `PostgresOutbox` is what the sender drives: it claims due events
with `FOR UPDATE SKIP LOCKED` (two replicas never take the same attempt) and settles
them; every decision is the domain's (`domain.events`: claimed, lapsed, attempted).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from functools import cache
from typing import Any, LiteralString
from uuid import UUID

from psycopg import AsyncConnection, AsyncCursor, sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from adapters.postgres.errors import translated_errors
from adapters.postgres.finishing import COUNT_COLUMNS
from adapters.postgres.pool import live_connection
from application.ports import EventPageKey
from domain.events import (
    Delivery,
    Destination,
    Event,
    EventRules,
    EventStatus,
    TaskRef,
    attempted,
    claimed,
    lapsed,
)
from domain.outcomes import TaskCount
from domain.tasks import EventType, Notify

_COLUMNS = tuple(Event.model_fields)
_JSON = frozenset({"payload", "destination"})
# The columns a claim or a settlement changes, in the order `settle` unnests them.
_SETTLED = ("status", "attempts", "next_attempt_at", "finished_at", "http_status", "last_error")

_QUERIES: dict[str, LiteralString] = {
    "insert": """
        INSERT INTO {events} ({columns})
        SELECT * FROM unnest(
            %(id)s::uuid[], %(type)s::text[], %(task_id)s::uuid[], %(task_name)s::text[],
            %(run_id)s::uuid[], %(payload)s::jsonb[], %(destination)s::jsonb[],
            %(status)s::text[], %(attempts)s::integer[], %(created_at)s::timestamptz[],
            %(next_attempt_at)s::timestamptz[], %(deadline)s::timestamptz[],
            %(finished_at)s::timestamptz[], %(http_status)s::integer[], %(last_error)s::text[]
        )""",
    # Due events, earliest first (a range scan of events_due_idx), skipping the rows
    # another replica's claim holds until it commits.
    "lock_due": """
        SELECT {columns} FROM {events}
        WHERE status = 'pending' AND next_attempt_at <= %(now)s
        ORDER BY next_attempt_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED""",
    "lock_ids": """
        SELECT {columns} FROM {events}
        WHERE id = ANY(%(ids)s::uuid[]) AND status = 'pending'
        ORDER BY id
        FOR UPDATE""",
    "settle": """
        UPDATE {events} AS e SET
            status = s.status, attempts = s.attempts, next_attempt_at = s.next_attempt_at,
            finished_at = s.finished_at, http_status = s.http_status, last_error = s.last_error
        FROM unnest(
            %(id)s::uuid[], %(status)s::text[], %(attempts)s::integer[],
            %(next_attempt_at)s::timestamptz[], %(finished_at)s::timestamptz[],
            %(http_status)s::integer[], %(last_error)s::text[]
        ) AS s (id, status, attempts, next_attempt_at, finished_at, http_status, last_error)
        WHERE e.id = ANY(%(id)s::uuid[]) AND e.id = s.id""",
    "list": """
        SELECT {columns} FROM {events}
        WHERE (%(status)s::text IS NULL OR status = %(status)s::text)
          AND (%(after_created_at)s::timestamptz IS NULL
               OR (created_at, id) < (%(after_created_at)s::timestamptz, %(after_id)s::uuid))
        ORDER BY created_at DESC, id DESC
        LIMIT %(limit)s""",
    # What the event rules read of the tasks of some runs; with no SCHEDULER_EVENTS_URL
    # (`every` false) only tasks with `notify` can raise an event.
    "task_refs": """
        SELECT t.id, t.name, t.notify FROM {tasks} AS t
        WHERE t.id = ANY(ARRAY(
            SELECT r.task_id FROM {runs} AS r WHERE r.id = ANY(%(run_ids)s::uuid[])))
          AND (%(every)s::boolean OR t.notify IS NOT NULL)""",
    "count": "SELECT count(*) AS n FROM {events} WHERE status = %(status)s",
    "delete_before": """
        DELETE FROM {events}
        WHERE id = ANY(ARRAY(
            SELECT id FROM {events}
            WHERE status <> 'pending' AND finished_at < %(cutoff)s
            ORDER BY finished_at
            LIMIT %(batch)s
            FOR UPDATE SKIP LOCKED
        ))""",
}


@cache
def event_queries(schema: str) -> dict[str, bytes]:
    """The outbox's statements in `schema`, rendered once."""
    fields = {
        "events": sql.Identifier(schema, "events"),
        "tasks": sql.Identifier(schema, "tasks"),
        "runs": sql.Identifier(schema, "runs"),
        "columns": sql.SQL(", ").join(map(sql.Identifier, _COLUMNS)),
    }
    return {name: sql.SQL(text).format(**fields).as_bytes(None) for name, text in _QUERIES.items()}


def _params(events: Sequence[Event], names: Iterable[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name in names:
        values = [getattr(event, name) for event in events]
        if name in _JSON:
            values = [json.dumps(_json(value)) for value in values]
        elif name in ("type", "status"):
            values = [value.value for value in values]
        params[name] = values
    return params


def _json(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, Destination) else value


async def write_events(conn: AsyncConnection[Any], schema: str, events: Sequence[Event]) -> None:
    """Insert `events` in the transaction `conn` holds (one statement; none when empty)."""
    if events:
        await conn.execute(event_queries(schema)["insert"], _params(events, _COLUMNS))


def read_task_refs(
    conn: AsyncConnection[Any], schema: str, rules: EventRules, run_ids: Sequence[UUID]
) -> Awaitable[AsyncCursor[Any]]:
    """Send the read of what `rules` need of the tasks of `run_ids`, in `conn`'s
    transaction (pipelined: fetch it with `task_refs`)."""
    cur = conn.cursor(row_factory=dict_row)
    params = {"run_ids": list(run_ids), "every": rules.default_url is not None}
    return cur.execute(event_queries(schema)["task_refs"], params)


async def task_refs(cur: AsyncCursor[Any]) -> dict[UUID, TaskRef]:
    refs = {}
    for row in await cur.fetchall():
        notify = None if row["notify"] is None else Notify.model_validate(row["notify"])
        refs[row["id"]] = TaskRef(row["id"], row["name"], notify)
    return refs


def task_counts(locked: Iterable[dict[str, Any]]) -> dict[UUID, TaskCount]:
    """The counts before a batch of outcomes, of the rows `lock_counted_tasks` locked."""
    return {row["id"]: TaskCount(**{name: row[name] for name in COUNT_COLUMNS}) for row in locked}


def to_event(row: dict[str, Any]) -> Event:
    row["type"] = EventType(row["type"])
    row["status"] = EventStatus(row["status"])
    return Event.model_validate(row)


class PostgresOutbox:
    """The EventStore port on the `events` table. `pool` is opened by its owner."""

    def __init__(self, pool: AsyncConnectionPool[Any], schema: str = "scheduler") -> None:
        self._pool = pool
        self._q = event_queries(schema)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncConnection[Any]]:
        async with translated_errors(), live_connection(self._pool) as conn:  # noqa: SIM117
            async with conn.transaction():  # the pool's connections are in autocommit
                yield conn

    async def _rows(self, conn: AsyncConnection[Any], name: str, params: Any) -> list[Any]:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(self._q[name], params)
        return await cur.fetchall()

    async def _settle(self, conn: AsyncConnection[Any], events: Sequence[Event]) -> None:
        if events:
            await conn.execute(self._q["settle"], _params(events, ("id", *_SETTLED)))

    async def claim_events(self, now: datetime, limit: int) -> list[Event]:
        async with self._transaction() as conn:
            rows = await self._rows(conn, "lock_due", {"now": now, "limit": limit})
            taken = [lapsed(e, now) or claimed(e, now) for e in map(to_event, rows)]
            await self._settle(conn, taken)
        return taken

    async def record_deliveries(
        self, results: Sequence[tuple[UUID, int, Delivery]], now: datetime
    ) -> list[Event]:
        if not results:
            return []
        ids = [event_id for event_id, _, _ in results]
        async with self._transaction() as conn:
            rows = await self._rows(conn, "lock_ids", {"ids": ids})
            locked = {event.id: event for event in map(to_event, rows)}
            settled = []
            for event_id, attempts, delivery in results:
                event = locked.get(event_id)
                # Only the claim that made this attempt settles it: one that lapsed and
                # was taken over (its attempts moved on) has lost its say.
                if event is not None and event.attempts == attempts:
                    settled.append(attempted(event, delivery, now))
            await self._settle(conn, settled)
        return settled

    async def list_events(
        self, status: EventStatus | None, after: EventPageKey | None, limit: int
    ) -> list[Event]:
        params = {
            "status": None if status is None else status.value,
            "after_created_at": None if after is None else after.created_at,
            "after_id": None if after is None else after.id,
            "limit": limit,
        }
        async with translated_errors(), live_connection(self._pool) as conn:
            return [to_event(row) for row in await self._rows(conn, "list", params)]

    async def count_events(self, status: EventStatus) -> int:
        async with translated_errors(), live_connection(self._pool) as conn:
            rows = await self._rows(conn, "count", {"status": status.value})
        return int(rows[0]["n"])

    async def delete_events_before(self, cutoff: datetime, batch: int) -> int:
        async with self._transaction() as conn:
            cur = await conn.execute(self._q["delete_before"], {"cutoff": cutoff, "batch": batch})
        return max(cur.rowcount, 0)
