"""The transport's pool and HTTP/1.1 connections: reuse, limits, waiting, expiry, servers
that close connections, message framings, cancellation; and the guard's DNS cache."""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import httpx
import pytest

from adapters.http import HttpExecutor, HttpExecutorSettings, OutboundDenied, OutboundGuard
from adapters.http.guard import ResolutionFailed
from adapters.http.transport import GuardedTransport
from domain.runs import RunStatus
from tests.adapters.http.builders import FakeResolver, call, call_once, http_task, make_run
from tests.adapters.http.conftest import MakeExecutor
from tests.fixtures.target import RecordingTarget, Response

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
CLOSE = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"

# An answer: the bytes to send for one request, and whether to close afterwards.
Answer = Callable[[int], tuple[bytes, bool]]


@dataclass
class ScriptedServer:
    """An HTTP/1.1 server on this test's event loop whose answers are raw bytes, so a
    test can choose the framing and when connections close. Counts connections."""

    answer: Answer = lambda _: (OK, False)
    delay: float = 0.0
    connections: int = 0
    open_now: int = 0
    most_open: int = 0
    requests: int = 0
    heads: list[bytes] = field(default_factory=list)
    server: asyncio.Server | None = None

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                self.heads.append(head)
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                self.requests += 1
                if self.delay:
                    await asyncio.sleep(self.delay)
                data, close = self.answer(self.requests)
                writer.write(data)
                await writer.drain()
                if close:
                    return
        finally:
            self.open_now -= 1
            writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    scripted = ScriptedServer()
    await scripted.start()
    yield scripted
    await scripted.stop()


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
    await asyncio.sleep(0.05)
    waited = await executor.execute(impatient, make_run(impatient), None)

    assert waited.error == "timed out after 0.2s"
    assert (await first).status is RunStatus.SUCCEEDED


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
    await asyncio.sleep(0.05)  # the close arrives
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


# -- the guard's resolution cache ----------------------------------------------------


async def test_new_connections_to_a_name_ask_dns_once(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    server.answer = lambda _: (CLOSE, True)  # a new connection for every call
    resolver = FakeResolver({"target.test": ["127.0.0.1"]})
    executor = make_executor(resolver=resolver)
    task = http_task(f"http://target.test:{server.port}/")

    for _ in range(3):
        assert (await executor.execute(task, make_run(task), None)).error is None

    assert server.connections == 3
    assert resolver.lookups == ["target.test"]


async def test_without_the_cache_every_connection_asks_dns(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    server.answer = lambda _: (CLOSE, True)
    resolver = FakeResolver({"target.test": ["127.0.0.1"]})
    executor = make_executor(HttpExecutorSettings(dns_cache_seconds=0), resolver=resolver)
    task = http_task(f"http://target.test:{server.port}/")

    for _ in range(2):
        assert (await executor.execute(task, make_run(task), None)).error is None

    assert resolver.lookups == ["target.test", "target.test"]


async def test_a_cached_answer_is_checked_at_every_use() -> None:
    resolver = FakeResolver({"mixed.test": ["127.0.0.1", "169.254.169.254"]})
    guard = OutboundGuard(resolver=resolver, cache_seconds=60)

    for _ in range(2):
        with pytest.raises(OutboundDenied, match=r"169\.254\.169\.254"):
            await guard.resolve("mixed.test", 80)

    assert resolver.lookups == ["mixed.test"]


async def test_the_cache_is_per_name_and_expires() -> None:
    resolver = FakeResolver({"a.test": ["10.0.0.1"], "b.test": ["10.0.0.2"]})
    guard = OutboundGuard(resolver=resolver, cache_seconds=0.05)

    assert await guard.resolve("a.test", 80) == [ipaddress.ip_address("10.0.0.1")]
    assert await guard.resolve("A.TEST.", 443) == [ipaddress.ip_address("10.0.0.1")]
    assert await guard.resolve("b.test", 80) == [ipaddress.ip_address("10.0.0.2")]
    await asyncio.sleep(0.1)
    await guard.resolve("a.test", 80)

    assert resolver.lookups == ["a.test", "b.test", "a.test"]


async def test_a_failed_lookup_is_not_cached() -> None:
    resolver = FakeResolver({})
    guard = OutboundGuard(resolver=resolver, cache_seconds=60)

    with pytest.raises(ResolutionFailed):
        await guard.resolve("late.test", 80)
    resolver.table["late.test"] = ["10.0.0.3"]

    assert await guard.resolve("late.test", 80) == [ipaddress.ip_address("10.0.0.3")]
    assert resolver.lookups == ["late.test", "late.test"]


async def test_concurrent_lookups_of_one_name_are_shared() -> None:
    lookups: list[str] = []
    release = asyncio.Event()

    async def slow_resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        await release.wait()
        return ["10.0.0.4"]

    guard = OutboundGuard(resolver=slow_resolver, cache_seconds=60)
    calls = [asyncio.create_task(guard.resolve("slow.test", 80)) for _ in range(5)]
    await asyncio.sleep(0.01)
    calls[0].cancel()  # one caller giving up does not end the lookup for the others
    release.set()
    answers = await asyncio.gather(*calls[1:])

    assert answers == [[ipaddress.ip_address("10.0.0.4")]] * 4
    assert lookups == ["slow.test"]


# -- TLS ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for target.test: (certificate file, key file)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    command = [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    command += ["-subj", "/CN=target.test", "-addext", "subjectAltName=DNS:target.test"]
    command += ["-keyout", key, "-out", cert]
    subprocess.run(
        command,
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_tls_verifies_the_name_at_the_checked_address(
    server: ScriptedServer, certificate: tuple[str, str]
) -> None:
    cert, key = certificate
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    tls = await asyncio.start_server(server._serve, "127.0.0.1", 0, ssl=server_side)
    port = tls.sockets[0].getsockname()[1]
    resolver = FakeResolver({"target.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    transport = GuardedTransport(
        OutboundGuard(resolver=resolver),
        max_connections=4,
        ssl_context=ssl.create_default_context(cafile=cert),
    )
    try:
        async with httpx.AsyncClient(transport=transport) as client:
            for _ in range(2):
                answer = await client.get(f"https://target.test:{port}/")
                assert (answer.status_code, answer.text) == (200, "ok")
            assert server.connections == 1  # kept alive over TLS

            with pytest.raises(httpx.ConnectError, match="certificate verify failed"):
                await client.get(f"https://other.test:{port}/")
    finally:
        tls.close()
