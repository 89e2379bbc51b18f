"""Fixtures of the system tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def schema(fresh_schema: str) -> str:
    """The schema the servers of a system test share (tests/fixtures/postgres.py)."""
    return fresh_schema
