"""`serve`'s text logs: one line per record, whatever the record holds."""

from __future__ import annotations

import logging

import pytest

from entrypoints.logs import configure_logging


def test_a_record_with_line_breaks_and_a_traceback_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("INFO", "text")
    log = logging.getLogger("adapters.postgres.store")
    # As libpq words a lost connection.
    lost = "server closed the connection unexpectedly\n\tThis probably means the server ..."
    try:
        raise OSError(lost)
    except OSError:
        log.warning("store unavailable; retrying: %s", lost, exc_info=True, extra={"pass_": 3})
    log.info("next\r\nrecord")

    lines = capsys.readouterr().err.splitlines()

    assert len(lines) == 2
    assert lines[0].endswith(
        "OSError: server closed the connection unexpectedly\\n\tThis probably means the server ..."
    )
    assert "retrying: server closed the connection unexpectedly\\n\tThis probably" in lines[0]
    assert "Traceback (most recent call last):\\n" in lines[0]
    assert lines[1].endswith("adapters.postgres.store: next\\r\\nrecord")
