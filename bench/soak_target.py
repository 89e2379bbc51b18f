"""The soak's HTTP target on 127.0.0.1: records every call, answers by path.

`/ok/…` answers 200 at once, `/fail/…` 500, `/slow/…` 200 after `SLOW` seconds,
`/hang/…` after `HANG` seconds (past the tasks' timeout), and `/close/…` closes the
connection before answering. Each call is recorded with its wall-clock arrival, its
`Idempotency-Key` and `X-Scheduler-Run-Id`, so invariants can be checked against the
run rows afterwards. `/events/…` receives the tasks' `notify` events (docs/events.md):
answered 200 and kept apart, with their bodies.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SLOW = 1.5
HANG = 4.0


@dataclass(frozen=True, slots=True)
class Call:
    path: str
    key: str
    run_id: str
    received_at: float  # time.time()


class _Server(ThreadingHTTPServer):
    request_queue_size = 256
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # callers time out and reset connections on purpose here


class SoakTarget:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.events: list[dict[str, Any]] = []  # the bodies of the events received
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def url(self, path: str) -> str:
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)
        return f"http://{host}:{port}{path}"

    def start(self) -> SoakTarget:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def recorded(self) -> list[Call]:
        with self._lock:
            return list(self.calls)

    def recorded_events(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                kind = self.path.split("/")[1]
                if kind == "events":
                    with target._lock:
                        target.events.append(json.loads(body or b"{}"))
                    self._answer(200)
                    return
                call = Call(
                    self.path,
                    self.headers.get("Idempotency-Key", ""),
                    self.headers.get("X-Scheduler-Run-Id", ""),
                    time.time(),
                )
                with target._lock:
                    target.calls.append(call)
                if kind == "close":
                    self.close_connection = True
                    self.connection.close()
                    return
                if kind in ("slow", "hang"):
                    target._stopping.wait(SLOW if kind == "slow" else HANG)
                self._answer(500 if kind == "fail" else 200)

            def _answer(self, status: int) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # the caller gave up

            do_GET = do_PUT = do_PATCH = do_DELETE = do_POST

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
