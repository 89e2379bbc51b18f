"""Every connection the scheduler opens notices a database that vanished silently
(adapters/postgres/liveness.py), unless the URL says otherwise: what each connection
string becomes. tests/system/test_silent_partition.py shows the effect on a replica."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from adapters.postgres.liveness import LIVENESS_DEFAULTS, with_liveness


def test_a_url_without_settings_gets_every_default_and_keeps_the_rest() -> None:
    given = "postgresql://app:s%40cret@db.internal:6432/jobs?sslmode=require"
    params = conninfo_to_dict(with_liveness(given))
    assert params == {
        "user": "app",
        "password": "s@cret",
        "host": "db.internal",
        "port": "6432",
        "dbname": "jobs",
        "sslmode": "require",
        **LIVENESS_DEFAULTS,
    }


def test_a_setting_the_url_gives_wins() -> None:
    given = "postgresql://db/jobs?keepalives_idle=300&tcp_user_timeout=0"
    params = conninfo_to_dict(with_liveness(given))
    assert params["keepalives_idle"] == "300"
    assert params["tcp_user_timeout"] == "0"
    assert params["keepalives_count"] == LIVENESS_DEFAULTS["keepalives_count"]


def test_a_keyword_string_gets_them_too() -> None:
    params = conninfo_to_dict(with_liveness("host=db dbname=jobs keepalives=0"))
    assert params["keepalives"] == "0"
    assert params["host"] == "db"
    assert params["keepalives_interval"] == LIVENESS_DEFAULTS["keepalives_interval"]


def test_a_libpq_older_than_12_is_not_given_the_user_timeout_it_would_refuse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No libpq 11 is at hand; its version number is what the rule reads.
    monkeypatch.setattr(psycopg.pq, "version", lambda: 110_022)
    params = conninfo_to_dict(with_liveness("postgresql://db/jobs"))
    assert "tcp_user_timeout" not in params
    assert params["keepalives_idle"] == LIVENESS_DEFAULTS["keepalives_idle"]
