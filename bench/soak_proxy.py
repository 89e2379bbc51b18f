"""A TCP proxy between the soak's replicas and PostgreSQL, to fail the network on cue.

It runs its own asyncio loop in a thread. `cut()` drops every connection at once (the
replicas see a reset in the middle of whatever they were doing, transactions
included); `blackhole(seconds)` stops forwarding anything in either direction and holds
new connections unanswered for that long (a silent network partition), then drops
them all. `upstream_ports()` names the local ports of its connections to PostgreSQL,
which are the `client_port` of the replicas' backends in `pg_stat_activity`.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from concurrent.futures import Future
from typing import Any

CHUNK = 65536
HELD_KEPT = 1 << 20  # bytes of held client data kept for a test to look at
_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, zero seconds: close with a reset
# In a client's message, the COMMIT statement; in the server's, its CommandComplete tag.
_COMMIT = b"COMMIT\x00"
# The server's CommandComplete message of a COMMIT, whole.
_COMMIT_COMPLETE = b"C" + struct.pack("!i", 4 + len(_COMMIT)) + _COMMIT


def _fatal(code: bytes, message: bytes) -> bytes:
    """A server's ErrorResponse of severity FATAL: the session is over."""
    fields = b"SFATAL\x00VFATAL\x00C" + code + b"\x00M" + message + b"\x00\x00"
    return b"E" + struct.pack("!i", 4 + len(fields)) + fields


# What `pg_terminate_backend` makes a backend say before it closes the connection.
_TERMINATED = _fatal(b"57P01", b"terminating connection due to administrator command")


class _Pair:
    def __init__(self, client: asyncio.StreamWriter, server: asyncio.StreamWriter) -> None:
        self.client = client
        self.server = server
        self.committing = False  # a trapped COMMIT went up: its answer is never relayed
        self.ending = False  # a COMMIT went up after whose answer the session ends
        self.ended = False  # the client was told so: nothing more reaches it

    def abort(self) -> None:
        for writer in (self.client, self.server):
            transport = writer.transport
            if not transport.is_closing():
                # RST, not a polite FIN: a cut cable or a dead router. A linger of zero
                # makes the close a reset even when nothing is left unread, and a reset
                # is sent once, never retransmitted (a FIN is, until it arrives).
                sock = transport.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
                transport.abort()


class FaultyProxy:
    """`host`:`port` (127.0.0.1 unless told) forwarding to `upstream_host`:`upstream_port`."""

    def __init__(self, upstream_host: str, upstream_port: int, *, host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = host
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._pairs: set[_Pair] = set()
        self._flowing = asyncio.Event()
        self._server: asyncio.Server | None = None
        self.port = 0
        self.connections = 0  # accepted since start
        # What clients sent while nothing was forwarded (`hold`): the start of it.
        self.held = bytearray()
        self._commits_to_lose = 0  # `lose_commit_answers`
        self.commit_answers_lost = 0
        self._sessions_to_end = 0  # `end_sessions_at_commits`
        self.sessions_ended = 0

    def start(self) -> FaultyProxy:
        self._thread.start()
        self._run(self._listen()).result(10)
        return self

    def stop(self) -> None:
        self._run(self._close()).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def cut(self) -> int:
        """Drop every connection now; how many were dropped."""
        result: int = self._run(self._cut()).result(10)
        return result

    def blackhole(self, seconds: float) -> int:
        """Forward nothing for `seconds`, then drop every connection; how many."""
        self.hold()
        time.sleep(seconds)
        return self.release()

    def hold(self) -> None:
        """From now on forward nothing, and leave new connections unanswered."""
        self._run(self._hold()).result(10)

    def release(self) -> int:
        """Drop every connection (what was held is lost) and forward again; how many."""
        result: int = self._run(self._release()).result(10)
        return result

    def refuse(self) -> int:
        """Close the listener and drop every connection: new ones are refused, as by a
        stopped server; how many were dropped."""
        result: int = self._run(self._refuse()).result(10)
        return result

    def reopen(self) -> None:
        """Listen again, on the same port, after `refuse`."""
        self._run(self._listen(self.port)).result(10)

    def lose_commit_answers(self, count: int = 1) -> None:
        """Let the next `count` COMMITs reach PostgreSQL, then drop each connection as
        its answer comes back, unrelayed: the transaction landed and the client cannot
        know it (`commit_answers_lost` counts them)."""
        self._loop.call_soon_threadsafe(setattr, self, "_commits_to_lose", count)

    def end_sessions_at_commits(self, count: int = 1) -> None:
        """Let the next `count` COMMITs reach PostgreSQL (which carries them out) and
        their answers back; then, in place of what follows (the ReadyForQuery), the
        client hears that its session was ended (FATAL 57P01, as `pg_terminate_backend`
        makes a backend say when it comes just after a COMMIT) and nothing more, until
        it closes the connection (`sessions_ended` counts them)."""
        self._loop.call_soon_threadsafe(setattr, self, "_sessions_to_end", count)

    def upstream_ports(self) -> set[int]:
        result: set[int] = self._run(self._ports()).result(10)
        return result

    # -- in the proxy's loop ----------------------------------------------------------

    async def _ports(self) -> set[int]:
        ports: set[int] = set()
        for pair in self._pairs:
            name = pair.server.get_extra_info("sockname")
            if name:
                ports.add(int(name[1]))
        return ports

    def _run(self, coroutine: Any) -> Future[Any]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    async def _listen(self, port: int = 0) -> None:
        self._flowing.set()
        self._server = await asyncio.start_server(self._accept, self.host, port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _refuse(self) -> int:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        return await self._cut()

    async def _hold(self) -> None:
        self.held.clear()
        self._flowing.clear()

    async def _release(self) -> int:
        dropped = await self._cut()
        self._flowing.set()
        return dropped

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._cut()

    async def _cut(self) -> int:
        pairs = list(self._pairs)
        for pair in pairs:
            pair.abort()
        self._pairs.clear()
        return len(pairs)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        await self._flowing.wait()  # a new connection waits out a blackhole unanswered
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        pair = _Pair(writer, up_writer)
        self._pairs.add(pair)
        await asyncio.gather(
            self._pipe(reader, up_writer, pair, upstream=True), self._pipe(up_reader, writer, pair)
        )
        pair.abort()
        self._pairs.discard(pair)

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pair: _Pair,
        *,
        upstream: bool = False,
    ) -> None:
        try:
            while data := await reader.read(CHUNK):
                if upstream and self._commits_to_lose and _COMMIT in data:
                    self._commits_to_lose -= 1
                    pair.committing = True
                elif upstream and self._sessions_to_end and _COMMIT in data:
                    self._sessions_to_end -= 1
                    pair.ending = True
                elif not upstream and pair.committing and _COMMIT in data:
                    self.commit_answers_lost += 1
                    return  # the server answered the COMMIT: the client never hears it
                elif not upstream and pair.ending and _COMMIT_COMPLETE in data:
                    self.sessions_ended += 1
                    answered = data.index(_COMMIT_COMPLETE) + len(_COMMIT_COMPLETE)
                    writer.write(data[:answered] + _TERMINATED)
                    await writer.drain()
                    pair.ending, pair.ended = False, True
                    continue
                elif not upstream and pair.ended:
                    continue  # the session is over for the client, which closes it
                if not self._flowing.is_set():
                    if upstream and len(self.held) < HELD_KEPT:
                        self.held += data
                    await self._flowing.wait()
                    if pair not in self._pairs:
                        return  # cut at the end of the blackhole: the data is lost
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            pair.abort()
