"""A claim and a run started beside it never wait on each other in a cycle (docs/storage.md,
"Lock order").

A claim locks its due task rows, then takes their lease locks; a manual run, or a queued
run starting, takes the task's lease lock, then inserts a lease, whose foreign key takes
a key-share lock on the task row. When the claim locked its rows `FOR UPDATE`, the two
could deadlock (PostgreSQL broke it after a second and the API answered 503; an outside
soak saw it with no fault injected). The claim now locks `FOR NO KEY UPDATE`, which the
key-share lock does not wait on: a run starts while a claimer holds the row. An apply
that holds its tasks locks them the same way."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from adapters.postgres.queries import bind_queries
from application.ports import HoldScope
from domain.runs import RunStatus
from tests.adapters.postgres.support import MINUTE, T0
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task

pytestmark = pytest.mark.postgres


async def test_a_manual_run_starts_while_a_claimer_holds_the_tasks_row(
    postgres_backend: PostgresBackend,
) -> None:
    store = await postgres_backend.new_store()
    task = await store.create_task(make_task(due=T0))
    claim_due = bind_queries(postgres_backend.schema)["claim_due"]

    # A claimer stopped between locking the due rows and taking their lease locks.
    async with await psycopg.AsyncConnection.connect(postgres_backend.url) as claimer:
        locked = await claimer.execute(claim_due, {"now": T0 + MINUTE, "limit": 10})
        assert len(await locked.fetchall()) == 1

        manual = await asyncio.wait_for(store.start_manual_run(task.id, T0, "api:1"), 10)

        assert manual.run.status is RunStatus.RUNNING
        await claimer.rollback()


async def test_a_manual_run_starts_while_an_apply_holds_the_tasks_row(
    postgres_backend: PostgresBackend,
) -> None:
    """An apply that holds its tasks (`hold_tasks`, after losing to other writers)
    locks them as the claim does: a run of one of them starts meanwhile."""
    store = await postgres_backend.new_store()
    task = await store.create_task(make_task(due=None))
    async with store.hold_tasks(HoldScope(frozenset({task.name}))) as hold:
        assert [held.id for held in hold.tasks] == [task.id]
        manual = await asyncio.wait_for(store.start_manual_run(task.id, T0, "api:1"), 10)
        assert manual.run.status is RunStatus.RUNNING
