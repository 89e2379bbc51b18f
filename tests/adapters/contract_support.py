"""What the TaskStore contract modules share: the instants, the replica, outcomes, the
`store` fixture (one per backend: memory, PostgreSQL) and a claim of exactly one run.

Time is whatever the test says it is: every call that needs an instant takes one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from application.ports import TaskStore
from domain.runs import Run, RunOutcome, RunStatus
from domain.triggers import CronTrigger
from tests.fixtures.backends import Backend

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)
REPLICA = "contract:1"
MINUTELY = CronTrigger(expression="* * * * *")


def succeeded(at: datetime = T0) -> RunOutcome:
    return RunOutcome(
        status=RunStatus.SUCCEEDED,
        attempts=1,
        http_status=200,
        response_excerpt="ok",
        started_at=at,
        finished_at=at + SECOND,
    )


def failed(at: datetime = T0, error: str = "HTTP 500") -> RunOutcome:
    return RunOutcome(
        status=RunStatus.FAILED, attempts=2, http_status=500, error=error, finished_at=at + SECOND
    )


@pytest.fixture
async def store(backend: Backend) -> TaskStore:
    return await backend.new_store()


async def claim_one(store: TaskStore, now: datetime) -> Run:
    claimed = await store.claim_due(now, 10, REPLICA)
    assert len(claimed) == 1, claimed
    return claimed[0].run
