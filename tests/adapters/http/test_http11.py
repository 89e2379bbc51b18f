"""HTTP/1.1 as the pool speaks it since answers are parsed by httptools (docs/adr/0010):
what h11 did for it, checked at the wire."""

from __future__ import annotations

import httpx
import pytest

from adapters.http.guard import OutboundGuard
from adapters.http.transport import GuardedTransport
from domain.runs import RunStatus
from tests.adapters.http.builders import call, call_once
from tests.adapters.http.conftest import MakeExecutor
from tests.adapters.http.scripted_server import ScriptedServer


async def test_an_informational_answer_is_skipped(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    server.answer = lambda _: (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\nmade",
        False,
    )

    outcomes = await call(make_executor(), server.url(), 2)

    assert [(o.http_status, o.response_excerpt) for o in outcomes] == [(201, "made")] * 2
    assert server.connections == 1


async def test_a_body_cut_short_by_the_server_is_an_error(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    server.answer = lambda _: (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf", True)

    outcome = await call_once(make_executor(), server.url())

    assert outcome.status is RunStatus.FAILED
    assert outcome.error is not None
    assert outcome.error.startswith(f"connection to 127.0.0.1:{server.port} failed: ")


async def test_a_header_value_with_a_line_break_is_not_sent(server: ScriptedServer) -> None:
    transport = GuardedTransport(OutboundGuard(), max_connections=1)
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(httpx.LocalProtocolError, match="Illegal header value"):
            await client.get(server.url(), headers={"X-Note": "a\r\nX-Injected: yes"})

    assert server.requests == 0
