"""Getting the APScheduler adapter in tests: a missing extra skips outside CI and fails
in CI (`CI=true`, as .ci/run sets it), where the extra is always installed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.ci import in_ci


def require_apscheduler() -> None:
    if not in_ci():
        pytest.importorskip("apscheduler", reason="the 'apscheduler' extra is not installed")


def apscheduler_engine_class() -> Any:
    """`APSchedulerEngine`, imported only when a test asks for it."""
    require_apscheduler()
    from adapters.apscheduler import APSchedulerEngine

    return APSchedulerEngine
