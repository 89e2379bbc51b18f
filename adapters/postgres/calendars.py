"""The CalendarStore port on PostgreSQL: the calendars part of `PostgresTaskStore`.

A mixin over the store's plumbing (`_transaction`, `_read`, `_notify`). The tables are
`calendars` and `task_calendars` (schemata.toml); the statements are composed here, not
in queries.sql, since only this module runs them. The claim path keeps the calendars it
was handed by version (`claim_calendars`): a pass reads only the calendars whose version
moved, and one that claims no task naming a calendar reads none.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row

from adapters.postgres.advisory import calendar_lock_key, take_lock, take_shared_locks
from adapters.postgres.queries import spec_state
from adapters.postgres.rows import to_trigger
from adapters.postgres.transactions import PostgresStoreBase
from domain.calendars import Calendar, StoredCalendar, empty_calendar
from domain.errors import (
    CalendarInUse,
    CalendarNotFound,
    CalendarVersionConflict,
    DuplicateCalendarName,
    InvalidRequest,
)
from domain.history import ChangeCause, calendar_changes
from domain.replanning import calendar_name, replanned_plans
from domain.tasks import Task
from domain.triggers import Trigger

log = logging.getLogger(__name__)

_COLUMNS = (
    "id",
    "name",
    "description",
    "dates",
    "yearly",
    "weekdays",
    "version",
    "created_at",
    "updated_at",
)
_STATEMENTS = {
    "insert": "INSERT INTO {schema}.calendars ({columns}) VALUES ({values}) RETURNING {columns}",
    "by_name": "SELECT {columns} FROM {schema}.calendars WHERE name = %(name)s",
    "by_id": "SELECT {columns} FROM {schema}.calendars WHERE id = %(id)s",
    "lock": "SELECT {columns} FROM {schema}.calendars WHERE name = %(name)s FOR UPDATE",
    "list": "SELECT {columns} FROM {schema}.calendars"
    " WHERE %(after)s::text IS NULL OR name > %(after)s ORDER BY name LIMIT %(limit)s",
    "named": "SELECT {columns} FROM {schema}.calendars WHERE name = ANY(%(names)s)",
    # Only the calendars whose version is not the one the caller holds.
    "moved": "SELECT {c_columns} FROM {schema}.calendars AS c"
    " JOIN unnest(%(names)s::text[], %(versions)s::integer[]) AS k (name, version)"
    " ON k.name = c.name WHERE k.version IS DISTINCT FROM c.version",
    "update": "UPDATE {schema}.calendars SET description = %(description)s,"
    " dates = %(dates)s, yearly = %(yearly)s, weekdays = %(weekdays)s,"
    " version = %(version)s, updated_at = %(updated_at)s WHERE name = %(name)s",
    "delete": "DELETE FROM {schema}.calendars WHERE name = %(name)s",
    "task_names": "SELECT t.name FROM {schema}.task_calendars AS c"
    " JOIN {schema}.tasks AS t ON t.id = c.task_id WHERE c.calendar = %(name)s ORDER BY t.name",
    # The tasks naming the calendar, locked in id order (as every writer of several task
    # rows locks them), and of each only what a plan reads (domain.replanning.Plannable).
    # The trigger's own name is checked too: a task leaving the calendar in a write that
    # commits while this waits for its row is read again (the rows of task_calendars are
    # not) and left out.
    "lock_tasks": "SELECT id, trigger::text AS trigger, enabled, jitter_seconds, next_fire_at,"
    " last_run_at, claimed_through FROM {schema}.tasks WHERE id IN"
    " (SELECT task_id FROM {schema}.task_calendars WHERE calendar = %(name)s)"
    " AND trigger -> 'calendar' ->> 'name' = %(name)s ORDER BY id FOR NO KEY UPDATE",
    # Their new schedules and the history versions recording them, in one statement: the
    # version's state is the row's writable fields, as update_task records them.
    "replan_tasks": "WITH r AS (SELECT * FROM unnest(%(ids)s::uuid[],"
    " %(next_fire_at)s::timestamptz[], %(next_run_at)s::timestamptz[], %(changes)s::jsonb[])"
    " AS r (id, next_fire_at, next_run_at, changes)),"
    " u AS (UPDATE {schema}.tasks AS t SET next_fire_at = r.next_fire_at,"
    " next_run_at = r.next_run_at, version = t.version + 1, updated_at = %(at)s"
    " FROM r WHERE t.id = r.id RETURNING t.*, r.changes)"
    " INSERT INTO {schema}.task_history (task_id, version, at, actor, cause, changes, state)"
    " SELECT t.id, t.version, %(at)s, %(actor)s, %(cause)s, t.changes, {spec_state_of_t}"
    " FROM u AS t",
    # What a task write takes before it touches a task row: the calendars its tasks name,
    # in name order (the lock the foreign key check would take later, taken first), so
    # that it and a calendar change (calendar row, then task rows) lock in one order.
    "share": "SELECT name FROM {schema}.calendars WHERE name = ANY(%(names)s)"
    " ORDER BY name FOR KEY SHARE",
    # A task's row in task_calendars follows its trigger: written when it names a
    # calendar, removed when it no longer does.
    "unname": "DELETE FROM {schema}.task_calendars"
    " WHERE task_id = ANY(%(ids)s) AND NOT task_id = ANY(%(named)s)",
    "name": "INSERT INTO {schema}.task_calendars (task_id, calendar)"
    " SELECT * FROM unnest(%(named)s::uuid[], %(calendars)s::text[])"
    " ON CONFLICT (task_id) DO UPDATE SET calendar = EXCLUDED.calendar"
    " WHERE task_calendars.calendar <> EXCLUDED.calendar",
}


def calendar_statements(schema: str) -> dict[str, bytes]:
    fields = {
        "schema": sql.Identifier(schema),
        "columns": sql.SQL(", ").join(map(sql.Identifier, _COLUMNS)),
        "c_columns": sql.SQL(", ").join(sql.Identifier("c", name) for name in _COLUMNS),
        "values": sql.SQL(", ").join(sql.Placeholder(name) for name in _COLUMNS),
        "spec_state_of_t": spec_state("t"),
    }
    return {
        name: sql.SQL(text).format(**fields).as_bytes(None) for name, text in _STATEMENTS.items()
    }


def _params(calendar: StoredCalendar) -> dict[str, Any]:
    return {name: getattr(calendar, name) for name in _COLUMNS} | {
        "dates": list(calendar.dates),
        "yearly": list(calendar.yearly),
        "weekdays": list(calendar.weekdays),
    }


def _calendar(row: dict[str, Any]) -> StoredCalendar:
    return StoredCalendar.model_validate(row)


@dataclass(frozen=True, slots=True)
class _Plannable:
    """The columns of a task a re-plan reads (domain.replanning.Plannable): a whole task
    (its target validated) would cost more than its plan."""

    id: UUID
    trigger: Trigger
    enabled: bool
    jitter_seconds: int
    next_fire_at: datetime | None
    last_run_at: datetime | None
    claimed_through: datetime | None

    @classmethod
    def of(cls, row: dict[str, Any]) -> _Plannable:
        return cls(**(row | {"trigger": to_trigger(row["trigger"])}))


def _replan_params(
    rows: list[_Plannable], new: StoredCalendar, stored: StoredCalendar, actor: str | None
) -> dict[str, Any]:
    versions = (stored.version, new.version)
    plans = replanned_plans(rows, new, new.updated_at)
    fires = [
        row.next_fire_at if plan is None else plan.next_fire_at
        for row, plan in zip(rows, plans, strict=True)
    ]
    runs = [None if plan is None else plan.next_run_at for plan in plans]
    return {
        "ids": [row.id for row in rows],
        "next_fire_at": fires,
        "next_run_at": runs,
        "changes": [
            json.dumps(calendar_changes(row.next_fire_at, fire, versions))
            for row, fire in zip(rows, fires, strict=True)
        ],
        "at": new.updated_at,
        "actor": actor,
        "cause": ChangeCause.CALENDAR.value,
    }


class PostgresCalendars(PostgresStoreBase):
    """Calendars beside the tasks of the PostgreSQL store that mixes this in."""

    async def create_calendar(self, calendar: StoredCalendar) -> StoredCalendar:
        try:
            async with self._transaction() as conn:
                cur = conn.cursor(row_factory=dict_row)
                await cur.execute(self._c["insert"], _params(calendar) | {"version": 1})
                row = await cur.fetchone()
        except psycopg.errors.UniqueViolation as exc:
            raise DuplicateCalendarName(calendar.name) from exc
        assert row is not None
        return _calendar(row)

    async def get_calendar(self, name: str) -> StoredCalendar:
        rows = await self._read(self._c["by_name"], {"name": name})
        if not rows:
            raise CalendarNotFound(name)
        return _calendar(rows[0])

    async def get_calendar_by_id(self, calendar_id: UUID) -> StoredCalendar:
        rows = await self._read(self._c["by_id"], {"id": calendar_id})
        if not rows:
            raise CalendarNotFound(calendar_id)
        return _calendar(rows[0])

    async def list_calendars(self, after: str | None, limit: int) -> list[StoredCalendar]:
        rows = await self._read(self._c["list"], {"after": after, "limit": limit})
        return [_calendar(row) for row in rows]

    async def calendars_named(self, names: Collection[str]) -> dict[str, StoredCalendar]:
        if not names:
            return {}
        rows = await self._read(self._c["named"], {"names": list(names)})
        return {row["name"]: _calendar(row) for row in rows}

    @asynccontextmanager
    async def _changing(self, name: str) -> AsyncIterator[AsyncConnection[Any]]:
        """A transaction that changes the calendar `name`, which first waits for its
        turn (`take_calendar_turns` says why)."""
        async with self._transaction() as conn:
            await take_lock(conn, calendar_lock_key(self.schema, name))
            yield conn

    async def calendar_tasks(self, name: str) -> list[str]:
        return [row["name"] for row in await self._read(self._c["task_names"], {"name": name})]

    async def update_calendar(
        self, calendar: StoredCalendar, expected_version: int, *, actor: str | None = None
    ) -> tuple[StoredCalendar, int]:
        """Three round trips whatever the number of tasks: lock the calendar (after its
        turn: `_changing`), lock the tasks naming it, write both (the tasks and their
        history in one statement)."""
        async with self._changing(calendar.name) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(self._c["lock"], {"name": calendar.name})
            row = await cur.fetchone()
            if row is None:
                raise CalendarNotFound(calendar.name)
            stored = _calendar(row)
            if stored.version != expected_version:
                raise CalendarVersionConflict(calendar.name, expected_version, stored.version)
            new = calendar.model_copy(
                update={
                    "id": stored.id,
                    "created_at": stored.created_at,
                    "version": stored.version + 1,
                }
            )
            await conn.execute(self._c["update"], _params(new))
            await cur.execute(self._c["lock_tasks"], {"name": new.name})
            rows = [_Plannable.of(found) for found in await cur.fetchall()]
            if rows:
                await conn.execute(
                    self._c["replan_tasks"], _replan_params(rows, new, stored, actor)
                )
                await self._notify(conn, self.tasks_channel, f"calendar:{new.name}")
        self._calendar_cache[new.name] = new
        return new, len(rows)

    async def delete_calendar(self, name: str, expected_version: int | None = None) -> None:
        async with self._changing(name) as conn:
            cur = conn.cursor(row_factory=dict_row)
            # The lock first: a task write naming the calendar waits for this one to end.
            await cur.execute(self._c["lock"], {"name": name})
            row = await cur.fetchone()
            if row is None:
                raise CalendarNotFound(name)
            stored = _calendar(row)
            if expected_version is not None and stored.version != expected_version:
                raise CalendarVersionConflict(name, expected_version, stored.version)
            await cur.execute(self._c["task_names"], {"name": name})
            naming = [found["name"] for found in await cur.fetchall()]
            if naming:
                raise CalendarInUse(name, naming)
            await conn.execute(self._c["delete"], {"name": name})
        self._calendar_cache.pop(name, None)


# -- for the task writes and the claim path ----------------------------------------------


async def lock_named_calendars(
    conn: AsyncConnection[Any], statements: dict[str, bytes], tasks: Sequence[Task]
) -> None:
    """Lock the calendars `tasks` name (key share, as the foreign key would), first in
    the transaction of their write: a calendar change locks its row and then the task
    rows naming it, so a task write that locked a task row and then waited for the
    calendar could deadlock with it (docs/storage.md). No statement when none is named."""
    await lock_calendars(conn, statements, {n for t in tasks if (n := calendar_name(t))})


async def lock_calendars(
    conn: AsyncConnection[Any], statements: dict[str, bytes], names: Collection[str]
) -> None:
    """Lock these calendars (key share, in name order); no statement when none."""
    if names:
        await conn.execute(statements["share"], {"names": sorted(names)})


# A calendar's turns: an advisory lock per calendar, taken by an apply's hold naming it
# (shared, before its key-share lock on the calendar's row) and by a change of the
# calendar (exclusive, before its FOR UPDATE). A row lock lets a new key share through
# while an older FOR UPDATE waits, so holds one after another, each overlapping the
# key shares of the last, could keep a change waiting past the API's answer limit (an
# audit saw a 503); an advisory lock serves a new shared request only after the
# exclusive one waiting before it.
async def take_calendar_turns(
    conn: AsyncConnection[Any], schema: str, names: Collection[str]
) -> None:
    """Wait for the turns of these calendars (shared, in name order: see above),
    before their key-share locks; no statement when none. Only a write that reads the
    calendars it plans with after its locks takes them (an apply's hold): a write that
    planned before its transaction and waited for its turn behind a change would land
    after it with the plan of the calendar's previous version, where going first gets
    it re-planned by the change."""
    if names:
        keys = [calendar_lock_key(schema, name) for name in sorted(names)]
        await take_shared_locks(conn, keys)


async def calendars_in(
    conn: AsyncConnection[Any], statements: dict[str, bytes], names: Collection[str]
) -> dict[str, StoredCalendar]:
    """`calendars_named` in the caller's transaction."""
    if not names:
        return {}
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(statements["named"], {"names": list(names)})
    return {row["name"]: _calendar(row) for row in await cur.fetchall()}


async def name_calendars(
    conn: AsyncConnection[Any],
    statements: dict[str, bytes],
    tasks: Sequence[Task],
    *,
    created: bool,
) -> None:
    """Write the `task_calendars` rows of `tasks` in the transaction of their write
    (a created task naming no calendar costs no statement)."""
    named = [(task.id, name) for task in tasks if (name := calendar_name(task)) is not None]
    if not created:
        ids = [task.id for task in tasks]
        await conn.execute(
            statements["unname"], {"ids": ids, "named": [task_id for task_id, _ in named]}
        )
    if named:
        await conn.execute(
            statements["name"],
            {"named": [task_id for task_id, _ in named], "calendars": [n for _, n in named]},
        )


async def claim_calendars(
    conn: AsyncConnection[Any],
    statements: dict[str, bytes],
    cache: dict[str, StoredCalendar],
    tasks: Sequence[Task],
) -> dict[str, Calendar]:
    """The calendars the claimed `tasks` name, from `cache` (the store's, by name),
    reading in the claim's transaction only those whose version moved (none when no
    task names one)."""
    names = sorted({name for task in tasks if (name := calendar_name(task)) is not None})
    if not names:
        return {}
    held = [cache[name].version if name in cache else None for name in names]
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(statements["moved"], {"names": names, "versions": held})
    read = {row["name"]: _calendar(row) for row in await cur.fetchall()}
    for name, calendar in read.items():
        # Claims of one replica overlap (application/claim_pass.py), and the API writes
        # the cache too: a version read in an older snapshot must not replace a newer.
        if name not in cache or cache[name].version < calendar.version:
            cache[name] = calendar
    found: dict[str, Calendar] = {}
    for name in names:
        known = read.get(name) or cache.get(name)
        if known is None:  # the foreign key keeps this from happening
            log.error("calendar %r is named by a task but not stored", name)
        found[name] = known or empty_calendar(name)
    return found


def unknown_calendar(exc: psycopg.errors.ForeignKeyViolation) -> InvalidRequest:
    """A task write naming a calendar that is not stored (or went meanwhile)."""
    detail = exc.diag.message_detail or ""
    name = detail.split("=(", 1)[-1].split(")", 1)[0] if "=(" in detail else "?"
    return InvalidRequest("trigger.calendar.name", f"no calendar named {name!r} exists")
