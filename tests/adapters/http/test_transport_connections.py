"""The transport's pool and HTTP/1.1 connections: reuse, limits, waiting, expiry, servers
that close connections, message framings, cancellation."""

from __future__ import annotations

import asyncio
import gc

import httpx
import pytest

from adapters.http import HttpExecutor, HttpExecutorSettings, OutboundGuard
from adapters.http.transport import GuardedTransport
from domain.runs import RunStatus
from tests.adapters.http.builders import call, call_once, http_task, make_run
from tests.adapters.http.conftest import MakeExecutor
from tests.adapters.http.scripted_server import OK, ScriptedServer
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually


async def test_one_connection_serves_calls_one_after_another(
    executor: HttpExecutor, server: ScriptedServer
) -> None:
    task = http_task(server.url())

    for _ in range(3):
        outcome = await executor.execute(task, make_run(task), None)
        assert outcome.status is RunStatus.SUCCEEDED

    assert (server.requests, server.connections) == (3, 1)


async def test_max_connections_bounds_concurrent_calls(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    server.delay = 0.05
    executor = make_executor(HttpExecutorSettings(max_connections=2))
    task = http_task(server.url())

    outcomes = await asyncio.gather(
        *(executor.execute(task, make_run(task), None) for _ in range(6))
    )

    assert all(o.status is RunStatus.SUCCEEDED for o in outcomes)
    assert server.requests == 6
    assert server.most_open <= 2
    assert server.connections == 2  # the waiting calls reused them


async def test_a_call_waiting_for_a_connection_times_out(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    server.delay = 1.0
    executor = make_executor(HttpExecutorSettings(max_connections=1))
    slow = http_task(server.url())
    impatient = http_task(server.url(), timeout_seconds=0.2)

    first = asyncio.create_task(executor.execute(slow, make_run(slow), None))

    async def first_received() -> bool:
        return server.requests == 1

    await eventually(first_received, "the server to have the first call")
    waited = await executor.execute(impatient, make_run(impatient), None)

    # It timed out waiting for the one connection: its request never went out (a
    # call whose wait were unbounded would get the connection once the first call
    # ended, reach the server, and only then time out reading the slow answer).
    assert (waited.error, server.requests) == ("timed out after 0.2s", 1)
    assert (await first).status is RunStatus.SUCCEEDED
    assert server.requests == 1


async def test_a_cancelled_call_frees_its_connection(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    server.delay = 10.0
    executor = make_executor(HttpExecutorSettings(max_connections=1))
    task = http_task(server.url())
    call = asyncio.create_task(executor.execute(task, make_run(task), None))
    while not server.requests:
        await asyncio.sleep(0.01)

    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    server.delay = 0.0
    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.SUCCEEDED
    assert server.connections == 2  # the cancelled call's connection was closed


async def test_an_idle_connection_the_server_closed_is_not_reused(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    # The server closes each connection after answering, without saying so.
    server.answer = lambda _: (OK, True)
    executor = make_executor()
    task = http_task(server.url())

    first = await executor.execute(task, make_run(task), None)

    async def closed() -> bool:
        return server.closed == 1

    await eventually(closed, "the server to close the first connection")
    # Its close is in the client's socket by now (loopback delivers it as the server's
    # socket closes). The pool learns of it when the loop reads that socket, which the
    # loop does before it fires any timer due later: one timer's turn, not a guess at
    # how long the close takes to arrive.
    await asyncio.sleep(0.001)
    second = await executor.execute(task, make_run(task), None)

    assert (first.status, second.status) == (RunStatus.SUCCEEDED, RunStatus.SUCCEEDED)
    assert server.connections == 2


async def test_connection_close_answers(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    server.answer = lambda _: (
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 4\r\n\r\ndone",
        True,
    )

    outcomes = await call(make_executor(), server.url(), 3)

    assert [o.response_excerpt for o in outcomes] == ["done"] * 3
    assert server.connections == 3


async def test_a_chunked_answer_and_the_connection_is_kept(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    server.answer = lambda _: (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        False,
    )

    outcomes = await call(make_executor(), server.url(), 2)

    assert [o.response_excerpt for o in outcomes] == ["hello world"] * 2
    assert server.connections == 1


async def test_an_answer_that_ends_with_the_connection(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    server.answer = lambda _: (b"HTTP/1.0 200 OK\r\n\r\nuntil the end", True)

    outcome = await call_once(make_executor(), server.url())

    assert (outcome.status, outcome.response_excerpt) == (RunStatus.SUCCEEDED, "until the end")


async def test_a_server_that_hangs_up_without_answering(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    server.answer = lambda _: (b"", True)

    outcome = await call_once(make_executor(), server.url())

    assert outcome.error == (
        f"connection to 127.0.0.1:{server.port} failed: "
        "Server disconnected without sending a response."
    )


async def test_a_malformed_answer(make_executor: MakeExecutor, server: ScriptedServer) -> None:
    server.answer = lambda _: (b"NOT HTTP AT ALL\r\n\r\n", True)

    outcome = await call_once(make_executor(), server.url())

    assert outcome.error is not None
    assert outcome.error.startswith(f"connection to 127.0.0.1:{server.port} failed: ")


async def test_a_large_answer_is_read_only_up_to_the_excerpt(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    body = b"x" * 1_000_000
    server.answer = lambda _: (
        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body),
        False,
    )
    executor = make_executor(HttpExecutorSettings(response_excerpt_bytes=10))

    outcomes = await call(executor, server.url(), 2)

    assert [o.response_excerpt for o in outcomes] == ["x" * 10] * 2
    # The unread rest of an answer makes its connection unusable: closed, not reused.
    assert server.connections == 2


async def test_the_arrived_rest_of_an_answer_is_skipped_and_the_connection_kept(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    body = b"y" * 5000  # past the excerpt, but sent at once with the head
    server.answer = lambda _: (
        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body),
        False,
    )
    executor = make_executor(HttpExecutorSettings(response_excerpt_bytes=10))
    task = http_task(server.url())

    outcomes = []
    for _ in range(4):
        outcomes.append(await executor.execute(task, make_run(task), None))
        # The excerpt reader stopped early: its body iterator is finalized later, and
        # must then leave alone the connection another call uses by now.
        gc.collect()
        await asyncio.sleep(0)

    assert [o.response_excerpt for o in outcomes] == ["y" * 10] * 4
    assert server.connections == 1


async def test_idle_connections_expire(server: ScriptedServer) -> None:
    transport = GuardedTransport(OutboundGuard(), max_connections=4, keepalive_expiry=0.05)
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get(server.url())).text == "ok"
        await asyncio.sleep(0.1)
        assert (await client.get(server.url())).text == "ok"

    assert server.connections == 2


async def test_an_idle_connection_gives_way_to_another_origin(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    other = ScriptedServer()
    await other.start()
    try:
        executor = make_executor(HttpExecutorSettings(max_connections=1))
        here, there = http_task(server.url()), http_task(other.url(), timeout_seconds=1)

        assert (await executor.execute(here, make_run(here), None)).error is None
        assert (await executor.execute(there, make_run(there), None)).error is None
        assert (await executor.execute(here, make_run(here), None)).error is None
    finally:
        await other.stop()

    assert (server.connections, other.connections) == (2, 1)


async def test_a_request_goes_out_in_one_piece(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    executor = make_executor()
    task = http_task(server.url("/run"), headers={"X-Team": "data"}, body={"n": 1})

    await executor.execute(task, make_run(task), None)

    [head] = server.heads
    assert head.startswith(b"POST /run HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nX-Team: data\r\n" in head
    assert b"\r\nContent-Type: application/json\r\n" in head


async def test_cookies_are_not_kept_between_calls(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", Response(200, b"ok", {"Set-Cookie": "session=abc; Path=/"}))
    task = http_task(recording_target.url("/"))

    for _ in range(2):
        await executor.execute(task, make_run(task), None)

    assert [r.header("Cookie") for r in recording_target.received()] == [None, None]
