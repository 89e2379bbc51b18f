"""After an outage, the store answers again as soon as PostgreSQL does (docs/operations.md,
"Database outages"): psycopg_pool waits a doubling delay between its attempts to
replace a lost connection, which after 40 s of refused connections had grown to 32 s,
so requests kept failing for seconds after the database was back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from adapters.postgres import PostgresTaskStore, create_pool
from bench.soak_proxy import FaultyProxy
from domain.errors import StoreUnavailable
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

OUTAGE = 40.0  # seconds of refused connections: the doubling delay reaches 32 s


@pytest.fixture
def proxy(postgres_backend: PostgresBackend) -> Iterator[tuple[FaultyProxy, str]]:
    upstream = conninfo_to_dict(postgres_backend.url)
    proxy = FaultyProxy(str(upstream.get("host") or "127.0.0.1"), int(upstream.get("port") or 5432))
    proxy.start()
    try:
        yield proxy, make_conninfo(postgres_backend.url, host="127.0.0.1", port=str(proxy.port))
    finally:
        proxy.stop()


async def test_the_store_answers_again_within_seconds_of_the_database(
    proxy: tuple[FaultyProxy, str], postgres_backend: PostgresBackend
) -> None:
    faulty, url = proxy
    pool = create_pool(url, min_size=2, max_size=2, timeout=1.0)
    await pool.open(wait=True)
    try:
        store = PostgresTaskStore(pool, postgres_backend.schema)
        task = await store.create_task(make_task())
        faulty.refuse()  # the server is gone: every connection lost, new ones refused
        until = time.monotonic() + OUTAGE
        while time.monotonic() < until:  # a client keeps asking, as the API and engine do
            with pytest.raises(StoreUnavailable):
                await store.get_task(task.id)
            await asyncio.sleep(0.5)
        faulty.reopen()

        async def answered() -> bool:
            try:
                return (await store.get_task(task.id)).id == task.id
            except StoreUnavailable:
                return False

        # Polled: what matters is that it comes back well before the pool's next
        # attempt would have (up to 32 s after its last, under the doubling delay).
        await eventually(answered, "the store answering again", within=8.0, interval=0.25)
    finally:
        await pool.close()
