"""What psycopg logs when a transaction of the store fails inside its pipeline: the
error that failed it is the news (a duplicate name, a task changed meanwhile: answered
or retried by the store); psycopg's second warning, that leaving the pipeline then met
"pipeline aborted", is kept out of the logs (an outside audit counted one per apply
retried under contention, read by operators as a database fault). Which applies meet it
depends on when the server's error arrives, so the record psycopg writes is made here."""

from __future__ import annotations

import logging

import psycopg
import pytest

import adapters.postgres  # noqa: F401  # installs the store's logging filter

PSYCOPG_WARNING = "error ignored terminating %r: %s"


def warn(error: Exception) -> None:
    logging.getLogger("psycopg").warning(PSYCOPG_WARNING, "<AsyncPipeline [INERROR]>", error)


def test_the_aborted_pipeline_after_an_error_is_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="psycopg")

    warn(psycopg.errors.PipelineAborted("pipeline aborted"))

    assert caplog.records == []


def test_any_other_error_psycopg_ignores_is_still_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="psycopg")

    warn(psycopg.OperationalError("server closed the connection unexpectedly"))
    logging.getLogger("psycopg").warning("some other warning")

    assert [r.getMessage() for r in caplog.records] == [
        "error ignored terminating '<AsyncPipeline [INERROR]>': server closed the connection "
        "unexpectedly",
        "some other warning",
    ]
