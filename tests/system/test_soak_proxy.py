"""The soak's TCP proxy (bench/soak_proxy.py) fails the network as it says: a cut breaks
a connection in use, a blackhole holds a statement unanswered and then breaks it, and
new connections work again afterwards."""

from __future__ import annotations

import threading

import psycopg
import pytest

from bench.soak_proxy import FaultyProxy
from tests.fixtures.waiting import wait_for

pytestmark = pytest.mark.postgres


@pytest.fixture
def proxy(postgres_proxy: tuple[FaultyProxy, str]) -> tuple[FaultyProxy, str]:
    return postgres_proxy


def test_a_cut_breaks_the_connection_in_use_and_the_next_one_works(
    proxy: tuple[FaultyProxy, str],
) -> None:
    faulty, url = proxy
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT 1")
        (port,) = faulty.upstream_ports()
        me = "SELECT client_port FROM pg_stat_activity WHERE pid = pg_backend_pid()"
        assert conn.execute(me).fetchone() == (port,)  # how the soak finds what to terminate
        conn.execute("BEGIN")
        assert faulty.cut() == 1
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT 2").fetchone() == (2,)


def test_a_blackhole_holds_a_statement_then_breaks_it(proxy: tuple[FaultyProxy, str]) -> None:
    faulty, url = proxy
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT 1")
        outcome: list[BaseException | None] = []

        def query() -> None:
            try:
                conn.execute("SELECT 1")
                outcome.append(None)
            except psycopg.Error as exc:
                outcome.append(exc)

        faulty.hold()
        asking = threading.Thread(target=query)
        asking.start()
        # Released only once the statement is out and held: on a busy machine the thread
        # may not have sent it yet, and a cut before it is sent is another fault.
        wait_for(lambda: b"SELECT 1" in faulty.held, what="the statement held")
        asking.join(0.5)
        assert asking.is_alive() and outcome == []  # a forwarded SELECT 1 takes a millisecond
        assert faulty.release() == 1
        asking.join(10)
        [error] = outcome
        assert isinstance(error, psycopg.OperationalError)
        with psycopg.connect(url, autocommit=True) as again:
            assert again.execute("SELECT 2").fetchone() == (2,)
