"""The TaskStore port on PostgreSQL (psycopg 3, async, one connection pool).

`PostgresTaskStore` is its parts, a module each: `task_reads`, `task_writes`,
`run_starts` (claims, manual runs), `run_ends` (outcomes, lost leases), `run_reads`,
`cancels`, `retention`; `transactions` holds the plumbing they share.

Particular to this adapter:
- every statement runs in `schema` (default "scheduler"), created by `initializer`;
- task writes and cancel requests send `pg_notify` on `<schema>_tasks` and
  `<schema>_cancel` in the transaction of the write, which `PostgresWaker` listens to;
- transactions run in pipeline mode, so a claim batch of any size costs three round
  trips: (BEGIN, select due), (lock leases, count leases), (record claims, COMMIT);
- a lost connection, a refused one or a pool timeout raises StoreUnavailable, and the
  transaction it interrupted is rolled back: nothing is half-written.
"""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from adapters.postgres.backfill_ends import statements as backfill_statements
from adapters.postgres.backfills import PostgresBackfills
from adapters.postgres.calendars import PostgresCalendars, calendar_statements
from adapters.postgres.cancels import Cancels
from adapters.postgres.events import PostgresOutbox
from adapters.postgres.queries import bind_queries
from adapters.postgres.queueing import Queues
from adapters.postgres.retention import Retention
from adapters.postgres.run_ends import RunEnds
from adapters.postgres.run_reads import RunReads
from adapters.postgres.run_starts import RunStarts, valid_task
from adapters.postgres.stalls import Stalls
from adapters.postgres.task_reads import TaskReads
from adapters.postgres.task_writes import TaskWrites
from domain.events import EventRules


def channels(schema: str) -> tuple[str, str]:
    """The NOTIFY channels of a schema: task changes, cancel requests."""
    return f"{schema}_tasks", f"{schema}_cancel"


class PostgresTaskStore(
    TaskReads,
    TaskWrites,
    RunStarts,
    RunEnds,
    RunReads,
    Cancels,
    Retention,
    Stalls,
    PostgresCalendars,
):
    """Tasks, runs and leases in PostgreSQL. `pool` is opened and closed by its owner.
    `outbox` is the EventStore of the same schema; the events `events` says a claim or
    an outcome raises are written in the transaction that records it."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        schema: str = "scheduler",
        events: EventRules | None = None,
    ) -> None:
        self._pool = pool
        self.schema = schema
        self._rules = events or EventRules()
        self.outbox = PostgresOutbox(pool, schema)
        self._q = bind_queries(schema)
        self._c = calendar_statements(schema)
        self._calendar_cache = {}
        self._holding = asyncio.Lock()  # TaskWrites.hold_tasks: one at a time, here too
        self.tasks_channel, self.cancel_channel = channels(schema)
        self._b = backfill_statements(schema)
        self._queues = Queues(self._q, schema, valid_task, self._rules, self._b)
        self.backfills = PostgresBackfills(
            self._transaction, self._q, schema, self._wake_cancels, self._rules, self._b
        )

    async def _wake_cancels(self, conn: AsyncConnection[Any], run_ids: list[UUID]) -> None:
        for run_id in run_ids:
            await self._notify(conn, self.cancel_channel, run_id)

    async def ping(self) -> None:
        await self._one("ping", {})
