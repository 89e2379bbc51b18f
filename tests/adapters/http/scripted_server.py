"""An HTTP/1.1 server scripted byte by byte, for the tests of the transport's connections."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
CLOSE = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"

# An answer: the bytes to send for one request, and whether to close afterwards.
Answer = Callable[[int], tuple[bytes, bool]]


@dataclass
class ScriptedServer:
    """An HTTP/1.1 server on this test's event loop whose answers are raw bytes, so a
    test can choose the framing and when connections close. Counts connections, and
    the ones it has closed (once their socket is closed: the peer has the close)."""

    answer: Answer = lambda _: (OK, False)
    delay: float = 0.0
    connections: int = 0
    open_now: int = 0
    most_open: int = 0
    closed: int = 0
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
            with suppress(ConnectionError):
                await writer.wait_closed()
            self.closed += 1

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
