"""Logging configured from settings: one line per record, JSON or text."""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone
from typing import Any

# Attributes every LogRecord has; anything else was passed as `extra=` and is logged too.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "taskName",
    "color_message",  # uvicorn's ANSI-coloured copy of the message
}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the record's extras and,
    for an exception, its type and traceback."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(extras(record))
        if record.exc_info and record.exc_info[0] is not None:
            entry["exc_type"] = record.exc_info[0].__name__
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """`time level logger: message key=value …`, on one line: a line break inside (a
    PostgreSQL error's message has several, a traceback many) is written `\\n`, so
    that a reader taking a line for a record never meets half a record."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if "\n" in text or "\r" in text:
            return text.replace("\r", "\\r").replace("\n", "\\n")
        return text

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        pairs = " ".join(f"{key}={value}" for key, value in extras(record).items())
        return f"{line} {pairs}" if pairs else line


def extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler `configure_logging` installs (and replaces when called again)."""


def configure_logging(level: str = "INFO", log_format: str = "text") -> None:
    """Send every logger (uvicorn's included) to stderr in the chosen format."""
    handler = _Handler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    unconfigure_logging()
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    # httpx logs every request (with its full URL) at INFO; the engine already logs each
    # run, and a URL may carry a templated secret.
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))


def unconfigure_logging() -> None:
    """Take away the handler `configure_logging` installed (a process that ran the CLI
    in-process, as the tests do, and goes on after it: the handler holds the stderr of
    that moment, which may be closed by then)."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
