"""The local HTTP/1.1 targets of the bench scripts, each in a process of its own (so it
never competes with the scheduler under measure for the GIL).

One keep-alive server reads each request whole (its head, then `Content-Length` bytes
of body) and writes the answer its `Target` gives, after the target's `delay`; with
`close`, it closes the connection after the answer. `Fixed` answers every request
alike (`status`, `body`); a bench that looks at the requests passes a `Target` of its
own (bench/engine.py records what it received).

    process, port = start(Fixed(delay=0.02))
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
from dataclasses import dataclass
from http import HTTPStatus
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Protocol


class Target(Protocol):
    """What a target answers (sent to its process, so it must pickle)."""

    @property
    def delay(self) -> float: ...  # seconds between a request read and its answer

    @property
    def close(self) -> bool: ...  # close the connection after each answer

    def answer(self, head: bytes) -> bytes:
        """The whole answer to the request whose head (request line and headers) this is."""
        ...


def response(status: int, body: bytes, *, close: bool = False) -> bytes:
    """An HTTP/1.1 answer with a `Content-Length`, and `Connection: close` with `close`."""
    reason = HTTPStatus(status).phrase.encode()
    extra = b"Connection: close\r\n" if close else b""
    return b"HTTP/1.1 %d %s\r\nContent-Length: %d\r\n%s\r\n%s" % (
        status,
        reason,
        len(body),
        extra,
        body,
    )


@dataclass(frozen=True, slots=True)
class Fixed:
    """Every request answered `status` with `body`, after `delay` seconds."""

    status: int = 200
    body: bytes = b"ok"
    delay: float = 0.0
    close: bool = False

    def answer(self, head: bytes) -> bytes:
        return response(self.status, self.body, close=self.close)


class _Connection(asyncio.Protocol):
    def __init__(self, target: Target) -> None:
        self.target = target
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = self.buffer[:end]
            length = 0
            at = head.lower().find(b"\r\ncontent-length:")
            if at >= 0:
                length = int(head[at + 17 :].split(b"\r\n", 1)[0])
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            answer = self.target.answer(head)
            if self.target.delay > 0:
                asyncio.get_running_loop().call_later(self.target.delay, self._write, answer)
            else:
                self._write(answer)
            if self.target.close:
                return

    def _write(self, answer: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self.transport.write(answer)
        if self.target.close:
            self.transport.close()


def _serve(port_out: Connection, target: Target) -> None:
    async def serve() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _Connection(target), "127.0.0.1", 0, backlog=1024)
        port_out.send(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(serve())


def start(target: Target) -> tuple[BaseProcess, int]:
    """Start `target` in a process of its own: the process (terminate it when done) and
    the port it listens on, on 127.0.0.1."""
    context = mp.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_serve, args=(send, target), daemon=True)
    process.start()
    return process, int(receive.recv())
