"""A replica stopped in the middle of a claim (SIGSTOP, a frozen VM) keeps its locks on
the claimed task rows for as long as it is stopped, and every other replica skips those
tasks: an outside soak saw a task fire nothing for the 45 s its claimer was stopped.
The lost-run sweep of every replica now ends such a transaction once it has been open
longer than `stalled_transaction_timeout` (docs/reliability.md); what it did rolls back.
"""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from adapters.postgres.pool import application_name
from adapters.postgres.queries import bind_queries
from tests.adapters.postgres.support import MINUTE, T0
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually

pytestmark = pytest.mark.postgres
LIMIT = timedelta(seconds=1)


async def test_a_claim_left_open_by_a_stopped_replica_is_ended_and_its_task_claimed(
    postgres_backend: PostgresBackend,
) -> None:
    store = await postgres_backend.new_store()
    task = await store.create_task(make_task(due=T0))
    claim_due = bind_queries(postgres_backend.schema)["claim_due"]
    name = application_name(postgres_backend.schema)

    async with (
        await psycopg.AsyncConnection.connect(
            postgres_backend.url, application_name=name
        ) as stopped,
        await psycopg.AsyncConnection.connect(
            postgres_backend.url, application_name="someone-else"
        ) as other,
    ):
        # The stopped replica has locked the due row and goes no further; a transaction
        # of another application is as old and must be left alone.
        assert len(await (await stopped.execute(claim_due, {"now": T0, "limit": 10})).fetchall())
        await other.execute("SELECT 1")  # opens its transaction
        assert await store.claim_due(T0 + MINUTE, 10, "live") == []  # the row is skipped
        assert await store.end_stalled_transactions(timedelta(hours=1)) == 0  # too young

        async def ended() -> int:
            return await store.end_stalled_transactions(LIMIT)

        assert await eventually(ended, "the stopped replica's transaction ended") == 1

        # The backend goes as soon as it takes the signal, and its locks with it.
        claimed = await eventually(lambda: store.claim_due(T0 + MINUTE, 10, "live"), "a claim")
        assert [c.task.id for c in claimed] == [task.id]
        with pytest.raises(psycopg.OperationalError):
            await stopped.execute("SELECT 1")  # it finds its connection gone when it wakes
        assert (await (await other.execute("SELECT 1")).fetchone()) == (1,)
