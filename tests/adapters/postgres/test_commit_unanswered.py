"""A COMMIT that reached PostgreSQL and whose answer was lost with the connection, or
after whose answer the server ended the session (`pg_terminate_backend` just then: FATAL
57P01 while the connection does not yet read as closed): the transaction landed, and the
replica cannot tell. A claim, a manual run or a finish then looks for its runs and goes
on with them, rather than leaving them uncalled until their leases expire ("replica
lost")."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from adapters.postgres import PostgresTaskStore, create_pool
from bench.soak_proxy import FaultyProxy
from domain.runs import RunStatus
from tests.adapters.contract_support import SECOND, succeeded
from tests.adapters.postgres.support import MINUTE, T0, query
from tests.adapters.test_overlap_contract import add, claim_at
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task

pytestmark = pytest.mark.postgres


def commit_fault(proxy: FaultyProxy, fault: str) -> Callable[[], int]:
    """Arm `fault` on the next COMMIT; returns how many times it struck so far."""
    if fault == "answer lost":
        proxy.lose_commit_answers(1)
        return lambda: proxy.commit_answers_lost
    proxy.end_sessions_at_commits(1)
    return lambda: proxy.sessions_ended


FAULTS = pytest.mark.parametrize("fault", ["answer lost", "session ended"])


@pytest.fixture
async def store(
    postgres_proxy: tuple[FaultyProxy, str], postgres_backend: PostgresBackend
) -> AsyncIterator[PostgresTaskStore]:
    """The test schema's store, its connections going through the proxy."""
    _, url = postgres_proxy
    pool = create_pool(url, min_size=1, max_size=2, timeout=5.0)
    await pool.open(wait=True)
    try:
        yield PostgresTaskStore(pool, postgres_backend.schema)
    finally:
        await pool.close()


@FAULTS
async def test_a_claim_whose_commit_goes_unanswered_goes_on_with_its_runs(
    store: PostgresTaskStore,
    postgres_proxy: tuple[FaultyProxy, str],
    postgres_backend: PostgresBackend,
    fault: str,
) -> None:
    proxy, _ = postgres_proxy
    tasks = [await store.create_task(make_task()) for _ in range(3)]
    struck = commit_fault(proxy, fault)

    claimed = await store.claim_due(T0, 10, "r1")
    again = await store.claim_due(T0, 10, "r2")

    assert struck() == 1
    assert sorted(c.task.id for c in claimed) == sorted(t.id for t in tasks)
    assert {c.run.status for c in claimed} == {RunStatus.RUNNING}
    assert again == []  # the claim landed once: nothing is due twice
    url, schema = postgres_backend.url, postgres_backend.schema
    rows = await query(url, "SELECT id, status, replica FROM {schema}.runs", schema)
    assert sorted(rows) == sorted((c.run.id, "running", "r1") for c in claimed)


async def test_a_manual_run_whose_commit_answer_is_lost_goes_on(
    store: PostgresTaskStore, postgres_proxy: tuple[FaultyProxy, str]
) -> None:
    proxy, _ = postgres_proxy
    task = await store.create_task(make_task(due=None))
    proxy.lose_commit_answers(1)

    manual = await store.start_manual_run(task.id, T0 + MINUTE, "r1")

    assert proxy.commit_answers_lost == 1
    assert manual.run.manual and manual.run.status is RunStatus.RUNNING
    assert (await store.get_run(manual.run.id)).status is RunStatus.RUNNING


@FAULTS
async def test_a_finish_whose_commit_goes_unanswered_goes_on_with_the_queued_run_it_started(
    store: PostgresTaskStore, postgres_proxy: tuple[FaultyProxy, str], fault: str
) -> None:
    proxy, _ = postgres_proxy
    task = await add(store, "buffer_all")
    [holder] = await claim_at(store, 1)
    [queued] = await claim_at(store, 2)
    assert queued.run.status is RunStatus.QUEUED
    at = T0 + 25 * SECOND
    struck = commit_fault(proxy, fault)

    freed = await store.finish_runs_starting([(holder.run.id, succeeded(at))], at, "r1")

    assert struck() == 1
    assert [r.status for r in freed.runs] == [RunStatus.SUCCEEDED]
    assert [c.run.id for c in freed.started] == [queued.run.id]
    assert freed.started[0].run.status is RunStatus.RUNNING
    assert freed.started[0].task.id == task.id
