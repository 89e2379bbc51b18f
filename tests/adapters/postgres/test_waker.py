"""PostgresWaker: woken by writes from other connections, and back after its LISTEN
connection is killed."""

from __future__ import annotations

import asyncio
import logging

import psycopg
import pytest

from adapters.postgres import PostgresTaskStore, PostgresWaker
from bench.soak_proxy import FaultyProxy
from tests.fixtures.postgres import PostgresBackend
from tests.fixtures.tasks import make_task
from tests.fixtures.waiting import WAIT, eventually

pytestmark = pytest.mark.postgres


async def asleep(waker: PostgresWaker, seconds: float = 0.3) -> bool:
    """True when `wait()` does not return within `seconds` (nothing pending)."""
    try:
        await asyncio.wait_for(waker.wait(), seconds)
    except TimeoutError:
        return True
    return False


async def test_a_write_from_another_connection_wakes_promptly(
    postgres_backend: PostgresBackend, postgres_store: PostgresTaskStore
) -> None:
    waker = await postgres_backend.new_waker()
    assert await asleep(waker)
    await postgres_store.create_task(make_task())
    # Nothing else wakes an idle waker (it does not poll): the write's notification did.
    await asyncio.wait_for(waker.wait(), WAIT)
    assert await asleep(waker)  # one notification, one wake-up


async def test_a_pending_notification_makes_wait_return_at_once(
    postgres_backend: PostgresBackend, postgres_store: PostgresTaskStore
) -> None:
    waker = await postgres_backend.new_waker()
    await postgres_store.create_task(make_task())
    await eventually(lambda: asyncio.sleep(0.05, result=waker._event.is_set()))
    await asyncio.wait_for(waker.wait(), 0.1)


async def test_notify_wakes_the_other_engines(postgres_backend: PostgresBackend) -> None:
    sender, receiver = [await postgres_backend.new_waker() for _ in range(2)]
    await sender.notify()
    await asyncio.wait_for(receiver.wait(), 2)
    await asyncio.wait_for(sender.wait(), 2)


async def test_a_killed_listen_connection_comes_back_and_still_wakes(
    postgres_backend: PostgresBackend, postgres_store: PostgresTaskStore
) -> None:
    waker = await postgres_backend.new_waker()
    old = waker.listening_pid
    assert old is not None
    async with await psycopg.AsyncConnection.connect(postgres_backend.url, autocommit=True) as a:
        await a.execute("SELECT pg_terminate_backend(%s)", [old])

    async def listening_again() -> bool:
        return waker.listening_pid not in (None, old)

    await eventually(listening_again)
    # It wakes once on reconnecting (a notification may have been lost meanwhile) ...
    await asyncio.wait_for(waker.wait(), 2)
    assert await asleep(waker)
    # ... and then on every write, as before.
    await postgres_store.create_task(make_task())
    await asyncio.wait_for(waker.wait(), 2)


async def test_a_waker_starts_while_the_server_is_unreachable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="adapters.postgres.waker")
    waker = PostgresWaker(
        "postgresql://postgres@127.0.0.1:1/test", "scheduler", connect_timeout=1, max_retry=0.2
    )

    def failed_tries() -> int:
        return sum("the waker lost its connection" in r.getMessage() for r in caplog.records)

    try:
        # Nothing listens on port 1: a start that waited for the server would never end.
        async with asyncio.timeout(WAIT):
            await waker.start()  # returns after connect_timeout ...
        assert waker.listening_pid is None
        tried = failed_tries()

        async def tried_again() -> bool:
            return failed_tries() > tried

        await eventually(tried_again, "another try to connect")  # ... and keeps trying
        await waker.notify()  # logged, not raised; still wakes this engine
        await asyncio.wait_for(waker.wait(), 1)
    finally:
        await waker.close()
    await waker.close()  # idempotent


async def test_a_quiet_listen_connection_is_proven_alive_and_still_wakes(
    postgres_backend: PostgresBackend, postgres_store: PostgresTaskStore
) -> None:
    waker = PostgresWaker(postgres_backend.url, postgres_store.schema, keepalive=0.2)
    await waker.start()
    try:
        pid = waker.listening_pid

        async def kept_alive() -> bool:
            # The listening connection ran its keepalive statement, and is idle again.
            async with await psycopg.AsyncConnection.connect(postgres_backend.url) as conn:
                cur = await conn.execute(
                    "SELECT query, state FROM pg_stat_activity WHERE pid = %s", [pid]
                )
                return await cur.fetchone() == ("SELECT 1", "idle")

        await eventually(kept_alive, "the keepalive statement")
        assert await asleep(waker)  # the keepalive woke nobody
        await postgres_store.create_task(make_task())
        await asyncio.wait_for(waker.wait(), 2)
        assert waker.listening_pid == pid  # the same connection, never dropped
    finally:
        await waker.close()


async def test_a_waker_closes_at_once_while_its_probe_waits_on_a_silent_database(
    postgres_proxy: tuple[FaultyProxy, str], postgres_backend: PostgresBackend
) -> None:
    # A stop must not wait on a database that answers nothing (docs/adr/0018): the
    # LISTEN connection's keepalive probe is out, and psycopg's own cancel of it would
    # wait for the silent side.
    proxy, url = postgres_proxy
    waker = PostgresWaker(url, postgres_backend.schema, keepalive=0.2)
    await waker.start()
    assert waker.listening_pid is not None
    proxy.hold()
    try:
        await asyncio.sleep(0.6)  # the next probe goes out, and waits
        closing = asyncio.create_task(waker.close())
        done, _ = await asyncio.wait({closing}, timeout=3)
        assert closing in done, "closing the waker waited on the silent database"
    finally:
        proxy.release()
        await closing
