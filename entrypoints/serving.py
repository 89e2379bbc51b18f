"""`imbi-scheduler serve`: the API (or, with `--no-api`, only the probes and metrics) and
the engine in one process, until a signal stops it within a bound."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import threading
from types import FrameType

import uvicorn

from adapters.postgres.silence import hurry
from domain.errors import InvalidRequest
from domain.tasks import HttpTarget
from entrypoints.container import Container, build_container
from entrypoints.database_wait import StoppedWhileWaiting
from entrypoints.gc_tuning import tune_garbage_collector
from entrypoints.http.app import create_app
from entrypoints.http_writes import OneWriteHttpProtocol
from entrypoints.logs import configure_logging
from entrypoints.runtime import log, running
from entrypoints.settings import ConfigurationError, Settings, load_settings


class ListenError(OSError):
    """The API could not listen where it was told to."""


def serve(args: argparse.Namespace) -> int:
    # `--port 0` (any free port) is an override too.
    overrides = {n: getattr(args, n) for n in ("host", "port") if getattr(args, n) is not None}
    settings = load_settings(**overrides)
    configure_logging(settings.log_level, settings.log_format)
    if not args.no_api:
        settings.check_exposure()
        if not settings.tokens and not settings.listens_on_loopback:
            log.warning(
                "listening on %s with no API token (SCHEDULER_ALLOW_ANONYMOUS=true): anyone "
                "who reaches it may create tasks that call any address the outbound guard "
                "allows",
                settings.host,
            )
    container = build_container(settings)
    container.engine()  # a misconfigured engine fails here, before anything starts
    check_events_url(container, settings)
    asyncio.run(_serve(container, settings, api=not args.no_api, engine=not args.no_engine))
    return 0


def check_events_url(container: Container, settings: Settings) -> None:
    """SCHEDULER_EVENTS_URL through the outbound guard, as a task's `notify.url` is when
    written: one the guard denies would leave every event pending until it expired."""
    if settings.events_url is None:
        return
    try:
        container.executor().check(HttpTarget(url=settings.events_url))
    except InvalidRequest as exc:
        reason = "; ".join(error.message for error in exc.errors)
        raise ConfigurationError(f"invalid settings: SCHEDULER_EVENTS_URL: {reason}") from None


async def _serve(container: Container, settings: Settings, *, api: bool, engine: bool) -> None:
    """Run until SIGTERM, SIGINT or SIGHUP, then stop: the API stops taking requests and finishes
    those in flight, the engine drains (up to SCHEDULER_DRAIN_TIMEOUT), pools close."""
    stop = asyncio.Event()
    # Without the API (`--no-api`) the probes and metrics are served all the same: an
    # engine-only replica is the one whose lateness and runs are worth watching.
    app = create_app(container, run_engine=engine, manage_runtime=False, operations_only=not api)
    config = uvicorn.Config(
        app,
        settings.host,
        settings.port,
        lifespan="on",
        log_config=None,
        server_header=False,
        http=OneWriteHttpProtocol,  # each answer in one write (entrypoints/http_writes.py)
        # A request waiting on a database that went silent must not hold the stop.
        timeout_graceful_shutdown=REQUESTS_GRACE,
    )
    server, listener = _Server(config, asyncio.get_running_loop()), _listen(config)
    watchdog = StopWatchdog(settings.drain_timeout + STOP_MARGIN)

    def stop_serving() -> None:
        stop.set()
        server.should_exit = True  # what uvicorn watches while it serves
        watchdog.start()
        hurry(ANSWER_GRACE)

    loop = asyncio.get_running_loop()
    # SIGHUP too (a closed terminal, a supervisor): there is nothing to reload, and
    # killed outright the process would leave its runs to the lost-run sweep.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, stop_serving)
    try:
        async with running(container, engine=engine, stopping=stop):
            served = "API" if api else "/healthz, /readyz and /metrics"
            await _serve_until_stopped(server, listener, stop, served)
            watchdog.start()  # uvicorn took the signal itself: the stop starts here
    except StoppedWhileWaiting:
        log.info("stopped before PostgreSQL could be reached: nothing was started")
        return
    finally:
        watchdog.cancel()
    log.info("stopped")


async def _serve_until_stopped(
    server: uvicorn.Server, listener: socket.socket, stop: asyncio.Event, served: str
) -> None:
    tune_garbage_collector()  # after start-up: what it built is frozen
    if not stop.is_set():
        host, port = listener.getsockname()[:2]
        shown_host = f"[{host}]" if ":" in host else host
        log.info("%s listening on http://%s:%d", served, shown_host, port)
        # uvicorn handles SIGTERM/SIGINT itself while it serves, then returns.
        await server.serve(sockets=[listener])
    log.info("stopping: draining runs in flight")


# Seconds requests in flight may take once a stop began (uvicorn's graceful shutdown).
REQUESTS_GRACE = 10
# Seconds after a stop began by which a connection still out is shut (a request waiting
# on a silent database answers 503 within its grace, not cut off without an answer).
# The 4 s between them are for a busy machine: with 2 s, a replica on a machine at load
# 6 or more was once cut off by uvicorn before its 503 was out.
ANSWER_GRACE = REQUESTS_GRACE - 4


class _Server(uvicorn.Server):
    """uvicorn's server, whose own signal handling (while it serves) also hurries the
    connections out (`adapters.postgres.silence.hurry`)."""

    def __init__(self, config: uvicorn.Config, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(config)
        self._loop = loop

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # A signal handler: it may run between any two steps of the loop's work.
        self._loop.call_soon_threadsafe(hurry, ANSWER_GRACE)
        super().handle_exit(sig, frame)


# A stop that takes longer than the drain timeout and this is given up (StopWatchdog):
# the requests' grace, the engine's record grace, closing the pool, with room to spare.
STOP_MARGIN = 30.0
# The exit code of a stop given up (sysexits' EX_TEMPFAIL).
STOP_GIVEN_UP = 75


class StopWatchdog:
    """Ends the process if a stop has not finished `seconds` after it began. A database
    that went silent with its connections open (frozen, or a proxy in between that
    stopped forwarding) answers no statement and no cancel request, and each step of a
    stop (the engine's last pass, recording outcomes, the event sender, closing the
    pool) would wait for it as long as the silence lasts. Exiting is safe: whatever did
    not commit rolled back with the connection, and runs left running are failed by the
    lost-run sweep of another replica once their lease expires. A thread, so that it
    fires whatever the event loop is stuck on."""

    def __init__(self, seconds: float) -> None:
        self._timer = threading.Timer(seconds, self._give_up)
        self._timer.daemon = True
        self._seconds = seconds

    def start(self) -> None:
        if not self._timer.is_alive() and not self._timer.finished.is_set():
            self._timer.start()

    def cancel(self) -> None:
        self._timer.cancel()

    def _give_up(self) -> None:
        log.error(
            "stopping took longer than %.0f s (the database does not answer): exiting now; "
            "runs not recorded are failed by the lost-run sweep once their lease expires",
            self._seconds,
        )
        logging.shutdown()
        os._exit(STOP_GIVEN_UP)


class _Without(logging.Filter):
    """Drops the records whose message starts with `prefix`."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self._prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self._prefix)


def _listen(config: uvicorn.Config) -> socket.socket:
    """Bind the API's socket before anything starts, so a taken port fails at once.
    uvicorn would say "running on" as it binds, before the schema is ready or the
    database even reached: that line is said once the API serves."""
    quiet = _Without("Uvicorn running on")
    logging.getLogger("uvicorn.error").addFilter(quiet)
    try:
        bound = config.bind_socket()
    except SystemExit:  # uvicorn has logged why
        raise ListenError(f"could not listen on {config.host}:{config.port}") from None
    finally:
        logging.getLogger("uvicorn.error").removeFilter(quiet)
    # uvicorn creates the socket with protocol 0, and every accepted socket inherits it.
    # asyncio sets TCP_NODELAY only on sockets whose protocol says IPPROTO_TCP, so the
    # connections kept Nagle's algorithm: each answer's last small write waited for the
    # client's delayed ACK, ~40 ms on every request. The same descriptor, declared TCP,
    # gets what a listener asyncio binds itself gets.
    return socket.socket(bound.family, bound.type, socket.IPPROTO_TCP, fileno=bound.detach())
