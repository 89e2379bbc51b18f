"""Fixtures of the entrypoint tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from entrypoints.container import build_container
from entrypoints.http.app import create_app
from tests.entrypoints.helpers import make_settings


@pytest.fixture
async def client() -> AsyncIterator[AsyncTestClient[Any]]:
    """The API on a fresh in-memory store, engine running, no tokens."""
    app = create_app(build_container(make_settings()))
    async with AsyncTestClient(app=app) as test_client:
        yield test_client
