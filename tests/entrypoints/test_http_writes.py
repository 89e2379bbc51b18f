"""The API's answers go out in one write each (entrypoints/http_writes.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from entrypoints.http_writes import GatheredWrites
from tests.entrypoints.live import LiveServer


class _Socket(asyncio.Transport):
    """What a socket's transport was asked to send, write by write."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[bytes] = []
        self.closed = False
        self.aborted = False

    def writelines(self, list_of_data: Any) -> None:
        self.sent.append(b"".join(list_of_data))

    def write(self, data: Any) -> None:
        self.sent.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_write_buffer_size(self) -> int:
        return 0


async def _one_step() -> None:
    await asyncio.sleep(0)


async def test_writes_made_in_one_step_go_out_as_one() -> None:
    socket = _Socket()
    transport = GatheredWrites(socket, asyncio.get_running_loop())
    transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    transport.write(bytearray(b"{}"))
    assert socket.sent == []  # nothing waits longer than this step
    assert transport.get_write_buffer_size() == 40
    await _one_step()
    assert socket.sent == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
    transport.write(b"next")
    await _one_step()
    assert socket.sent[1:] == [b"next"]


async def test_a_gathered_buffer_is_copied_so_the_caller_may_reuse_it() -> None:
    socket = _Socket()
    transport = GatheredWrites(socket, asyncio.get_running_loop())
    buffer = bytearray(b"first")
    transport.write(buffer)
    buffer[:] = b"xxxxx"
    await _one_step()
    assert socket.sent == [b"first"]


async def test_closing_sends_what_was_gathered_and_aborting_drops_it() -> None:
    loop = asyncio.get_running_loop()
    closed, aborted = _Socket(), _Socket()
    first, second = GatheredWrites(closed, loop), GatheredWrites(aborted, loop)
    first.write(b"last answer")
    first.close()
    second.write(b"never sent")
    second.abort()
    await _one_step()
    assert (closed.sent, closed.closed) == ([b"last answer"], True)
    assert (aborted.sent, aborted.aborted) == ([], True)


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_served_answer_arrives_whole_on_a_kept_alive_connection(method: str) -> None:
    # Through a real `serve`: answers with and without a body, one after the other on
    # one connection, each complete (a head held back without its body would stall).
    with LiveServer({}) as server, httpx.Client(base_url=server.url) as client:
        for _ in range(3):
            answer = client.request(method, "/healthz")
            assert answer.status_code == 200
        assert client.get("/tasks").json()["items"] == []
        missing = client.get("/tasks/nope")
        assert missing.status_code == 404
        assert missing.headers["content-type"].startswith("application/problem+json")
