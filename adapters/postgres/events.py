"""The outbox on PostgreSQL: the `events` table (schemata.toml) and the EventStore port.

Two halves. `write_events` is called by `PostgresTaskStore` inside the transaction that
records a cause (a claim, a finish, a lost run), so an event exists exactly when its
cause was committed. `PostgresOutbox` is what the sender drives: it claims due events
with `FOR UPDATE SKIP LOCKED` (two replicas never take the same attempt) and settles
them; every decision is the domain's (`domain.events`: claimed, lapsed, attempted).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Collection, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from functools import cache, lru_cache
from typing import Any, LiteralString
from uuid import UUID

from psycopg import AsyncConnection, AsyncCursor, sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from adapters.postgres.errors import translated_errors
from adapters.postgres.finishing import COUNT_COLUMNS
from adapters.postgres.pool import live_connection, pipelined_transaction
from application.ports import EventPageKey
from domain.events import (
    Delivery,
    Destination,
    Event,
    EventRules,
    EventStatus,
    Outgoing,
    Progress,
    TaskRef,
    attempted,
    claimed,
    lapsed,
    payload_json,
)
from domain.outcomes import TaskCount
from domain.tasks import EventType, Notify

_COLUMNS = tuple(Event.model_fields)
# What the sender reads of a due event, in the order of `lock_due`'s columns (the JSON
# as text: its body is sent as stored, its destination parsed once per distinct one).
_PROGRESS = tuple(f.name for f in dataclasses.fields(Progress))
_OUTGOING = (*_PROGRESS, "destination", "body")
# The columns a claim or a settlement changes, in the order `settle` unnests them.
_SETTLED = ("status", "attempts", "next_attempt_at", "finished_at", "http_status", "last_error")
_TYPES = {t.value: t for t in EventType}
_STATUSES = {s.value: s for s in EventStatus}

_QUERIES: dict[str, LiteralString] = {
    "insert": """
        INSERT INTO {events} ({columns})
        SELECT * FROM unnest(
            %(id)b::uuid[], %(type)b::text[], %(task_id)b::uuid[], %(task_name)b::text[],
            %(run_id)b::uuid[], %(payload)b::text[]::jsonb[],
            %(destination)b::text[]::jsonb[], %(status)b::text[], %(attempts)b::integer[],
            %(created_at)b::timestamptz[], %(next_attempt_at)b::timestamptz[],
            %(deadline)b::timestamptz[], %(finished_at)b::timestamptz[],
            %(http_status)b::integer[], %(last_error)b::text[]
        )""",
    # Due events, earliest first (a range scan of events_due_idx), skipping the rows
    # another replica's claim holds until it commits.
    "lock_due": """
        SELECT {progress}, destination::text, payload::text FROM {events}
        WHERE status = 'pending' AND next_attempt_at <= %(now)s
        ORDER BY next_attempt_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED""",
    # The same, leaving out the destinations the sender has enough of in hand (a short
    # list; a separate statement so that the usual claim reads no destination).
    "lock_due_skipping": """
        SELECT {progress}, destination::text, payload::text FROM {events}
        WHERE status = 'pending' AND next_attempt_at <= %(now)s
          AND NOT (destination->>'url' = ANY(%(skip)s::text[]))
        ORDER BY next_attempt_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED""",
    "lock_ids": """
        SELECT {progress} FROM {events}
        WHERE id = ANY(%(ids)s::uuid[]) AND status = 'pending'
        ORDER BY id
        FOR UPDATE""",
    "settle": """
        UPDATE {events} AS e SET
            status = s.status, attempts = s.attempts, next_attempt_at = s.next_attempt_at,
            finished_at = s.finished_at, http_status = s.http_status, last_error = s.last_error
        FROM unnest(
            %(id)b::uuid[], %(status)b::text[], %(attempts)b::integer[],
            %(next_attempt_at)b::timestamptz[], %(finished_at)b::timestamptz[],
            %(http_status)b::integer[], %(last_error)b::text[]
        ) AS s (id, status, attempts, next_attempt_at, finished_at, http_status, last_error)
        WHERE e.id = ANY(%(id)b::uuid[]) AND e.id = s.id""",
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
        SELECT t.id, t.name, t.notify::text FROM {tasks} AS t
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
        "progress": sql.SQL(", ").join(map(sql.Identifier, _PROGRESS)),
    }
    return {name: sql.SQL(text).format(**fields).as_bytes(None) for name, text in _QUERIES.items()}


def _insert_params(events: Sequence[Event]) -> dict[str, Any]:
    """The arrays `insert` unnests: each payload as JSON once (the body every attempt
    sends), each destination as JSON; no validation (the events were built valid)."""
    params: dict[str, Any] = {name: [] for name in _COLUMNS}
    for event in events:
        for name in _COLUMNS:
            params[name].append(getattr(event, name))
    params["type"] = [value.value for value in params["type"]]
    params["status"] = [value.value for value in params["status"]]
    params["payload"] = [payload_json(value) for value in params["payload"]]
    params["destination"] = [value.model_dump_json() for value in params["destination"]]
    return params


def _settle_params(events: Sequence[Progress]) -> dict[str, Any]:
    params: dict[str, Any] = {"id": [event.id for event in events]}
    for name in _SETTLED:
        params[name] = [getattr(event, name) for event in events]
    params["status"] = [value.value for value in params["status"]]
    return params


@lru_cache(maxsize=1024)
def _destination(text: str) -> Destination:
    """A destination as stored (JSON), parsed once: most events of a replica go to a
    few destinations. Destinations are frozen, so sharing one is safe."""
    return Destination.model_validate_json(text)


@lru_cache(maxsize=1024)
def _notify(text: str) -> Notify:
    """A task's `notify` as stored (JSON), parsed once per distinct value."""
    return Notify.model_validate_json(text)


def _progress(row: Sequence[Any]) -> dict[str, Any]:
    fields = dict(zip(_PROGRESS, row, strict=False))
    fields["type"] = _TYPES[fields["type"]]
    fields["status"] = _STATUSES[fields["status"]]
    return fields


def _outgoing(row: Sequence[Any]) -> Outgoing:
    *_, destination, body = row
    return Outgoing(**_progress(row), destination=_destination(destination), body=body.encode())


async def write_events(conn: AsyncConnection[Any], schema: str, events: Sequence[Event]) -> None:
    """Insert `events` in the transaction `conn` holds (one statement; none when empty)."""
    if events:
        await conn.execute(event_queries(schema)["insert"], _insert_params(events), binary=True)


def read_task_refs(
    conn: AsyncConnection[Any], schema: str, rules: EventRules, run_ids: Sequence[UUID]
) -> Awaitable[AsyncCursor[Any]]:
    """Send the read of what `rules` need of the tasks of `run_ids`, in `conn`'s
    transaction (pipelined: fetch it with `task_refs`)."""
    cur = conn.cursor()
    params = {"run_ids": list(run_ids), "every": rules.default_url is not None}
    return cur.execute(event_queries(schema)["task_refs"], params)


async def task_refs(cur: AsyncCursor[Any]) -> dict[UUID, TaskRef]:
    return {
        task_id: TaskRef(task_id, name, None if notify is None else _notify(notify))
        for task_id, name, notify in await cur.fetchall()
    }


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
        """Two round trips for a claim or a settlement: (BEGIN, lock), (settle, COMMIT)."""
        async with (
            translated_errors(),
            live_connection(self._pool) as conn,
            pipelined_transaction(conn),
        ):
            yield conn

    async def _rows(self, conn: AsyncConnection[Any], name: str, params: Any) -> list[Any]:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(self._q[name], params)
        return await cur.fetchall()

    async def _locked(self, conn: AsyncConnection[Any], name: str, params: Any) -> list[Any]:
        cur = conn.cursor()  # tuples: the sender's hot path
        await cur.execute(self._q[name], params, binary=True)
        return await cur.fetchall()

    async def _settle(self, conn: AsyncConnection[Any], events: Sequence[Progress]) -> None:
        if events:
            await conn.execute(self._q["settle"], _settle_params(events), binary=True)

    async def claim_events(
        self, now: datetime, limit: int, skip: Collection[str] = ()
    ) -> list[Outgoing]:
        params: dict[str, Any] = {"now": now, "limit": limit}
        query = "lock_due"
        if skip:
            params["skip"], query = list(skip), "lock_due_skipping"
        async with self._transaction() as conn:
            rows = await self._locked(conn, query, params)
            taken = [lapsed(e, now) or claimed(e, now) for e in map(_outgoing, rows)]
            await self._settle(conn, taken)
        return taken

    async def record_deliveries(
        self, results: Sequence[tuple[UUID, int, Delivery]], now: datetime
    ) -> list[Progress]:
        if not results:
            return []
        ids = [event_id for event_id, _, _ in results]
        async with self._transaction() as conn:
            rows = await self._locked(conn, "lock_ids", {"ids": ids})
            locked = {row[0]: Progress(**_progress(row)) for row in rows}
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
