"""`serve` answers without Nagle's stall: small answers leave at once, not after the
client's delayed ACK (~40 ms on every request when the accepted sockets keep Nagle)."""

from __future__ import annotations

import asyncio
import socket
import statistics
import time

import httpx
import uvicorn

from entrypoints.cli import _listen
from tests.entrypoints.live import LiveServer, free_port

# A request stalled by Nagle meeting a delayed ACK takes at least 40 ms on Linux; an
# answer from the in-memory API takes 1-3 ms here, a few times that on a loaded machine.
STALL_S = 0.040
REQUESTS = 50


async def test_connections_accepted_by_the_api_listener_send_without_delay() -> None:
    config = uvicorn.Config(
        app="entrypoints.http.app:create_app", host="127.0.0.1", port=free_port(), log_config=None
    )
    listener = _listen(config)
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Record(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Record, sock=listener)
    async with server:
        _, writer = await asyncio.open_connection("127.0.0.1", config.port)
        try:
            assert await asyncio.wait_for(accepted, 10) != 0
        finally:
            writer.close()


def test_sequential_requests_on_one_connection_are_not_stalled() -> None:
    with (
        LiveServer({"SCHEDULER_LOG_LEVEL": "WARNING"}, ["--no-engine"]) as server,
        httpx.Client(base_url=server.url, timeout=10) as client,
    ):
        client.get("/healthz").raise_for_status()  # the connection every request reuses
        walls = []
        for _ in range(REQUESTS):
            start = time.perf_counter()
            client.get("/healthz").raise_for_status()
            walls.append(time.perf_counter() - start)

    # The median: a stall delays every request, a busy machine only some of them.
    assert statistics.median(walls) < STALL_S / 2, (
        f"median {statistics.median(walls) * 1000:.1f} ms per request over {REQUESTS} "
        f"requests on one connection: answers wait for the client's delayed ACK again"
    )
