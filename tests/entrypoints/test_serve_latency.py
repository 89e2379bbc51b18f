"""`serve` answers without Nagle's stall: its accepted connections have TCP_NODELAY, so
small answers leave at once, not after the client's delayed ACK (~40 ms on every request
when the accepted sockets keep Nagle). How long requests take is measured by
`bench/api.py` (p50 and p99 per request on one kept-alive connection), not here."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import httpx
import uvicorn

from entrypoints.serving import _listen
from tests.entrypoints.live import free_port
from tests.fixtures.waiting import eventually


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


async def _answer(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


async def test_uvicorn_serving_on_the_listener_answers_on_no_delay_connections() -> None:
    # As `serve` runs it: uvicorn's server on the socket `_listen` bound.
    config = uvicorn.Config(
        _answer, host="127.0.0.1", port=free_port(), log_config=None, lifespan="off"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[_listen(config)]))
    try:

        async def started() -> bool:
            return server.started

        await eventually(started, "uvicorn to start")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{config.port}") as client:
            assert (await client.get("/")).text == "ok"
            # The connection is kept alive: the server's side of it is still there.
            [connection] = server.server_state.connections
            sock = connection.transport.get_extra_info("socket")
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
            assert (await client.get("/")).text == "ok"  # and it goes on answering
    finally:
        server.should_exit = True
        await serving
