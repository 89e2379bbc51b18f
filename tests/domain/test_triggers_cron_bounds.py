"""Cron triggers: start_at, end_at and `after` (any offset, to the second), worked out by hand."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from domain.triggers import CronTrigger, fire_times
from tests.domain.cron_support import NY, UTC, cron, utc


@pytest.mark.parametrize(
    ("trigger", "after", "expected"),
    [
        pytest.param(
            cron("0 * * * *", start_at=utc(2026, 1, 1, 5)),
            utc(2025, 12, 31),
            utc(2026, 1, 1, 5),
            id="start-at-is-inclusive",
        ),
        pytest.param(
            cron("0 * * * *", start_at=utc(2026, 1, 1, 5, 0, 1)),
            utc(2025, 12, 31),
            utc(2026, 1, 1, 6),
            id="start-at-between-fire-times",
        ),
        pytest.param(
            cron("0 * * * *", start_at=utc(2026, 1, 1, 5)),
            utc(2026, 1, 1, 7, 30),
            utc(2026, 1, 1, 8),
            id="start-at-in-the-past-changes-nothing",
        ),
        pytest.param(
            cron("0 * * * *", NY, start_at=datetime(2026, 1, 1, 9)),
            utc(2025, 12, 1),
            utc(2026, 1, 1, 14),
            id="start-at-naive-is-read-in-the-trigger-zone",
        ),
        pytest.param(
            cron("0 * * * *", start_at=datetime(2026, 1, 1, 5, 0, 0, 500_000, tzinfo=UTC)),
            utc(2025, 12, 31),
            utc(2026, 1, 1, 5),
            id="start-at-sub-second-truncated",
        ),
        pytest.param(
            cron("0 * * * *", end_at=utc(2026, 1, 1, 3)),
            utc(2026, 1, 1, 2),
            utc(2026, 1, 1, 3),
            id="end-at-is-inclusive",
        ),
        pytest.param(
            cron("0 * * * *", end_at=utc(2026, 1, 1, 3)),
            utc(2026, 1, 1, 3),
            None,
            id="end-at-reached-means-none",
        ),
        pytest.param(
            cron("0 * * * *", end_at=utc(2026, 1, 1, 3, 30)),
            utc(2026, 1, 1, 3),
            None,
            id="end-at-before-next-fire-means-none",
        ),
        pytest.param(
            cron("0 * * * *", NY, end_at=datetime(2026, 1, 1, 9)),
            utc(2026, 1, 1, 13, 30),
            utc(2026, 1, 1, 14),
            id="end-at-naive-is-read-in-the-trigger-zone",
        ),
        pytest.param(
            cron("0 2 * * *", NY, start_at=datetime(2026, 3, 8, 2, 30)),
            utc(2026, 3, 1),
            utc(2026, 3, 9, 6),
            id="start-at-naive-in-a-gap-is-read-forward",
        ),
        pytest.param(
            cron("* * * * *"),
            datetime(2026, 1, 1, 10, 0, 59, 999_999, tzinfo=UTC),
            utc(2026, 1, 1, 10, 1),
            id="after-sub-second-truncated",
        ),
        pytest.param(
            cron("* * * * *"),
            datetime(2026, 1, 1, 10, 0, 0, 1, tzinfo=UTC),
            utc(2026, 1, 1, 10, 1),
            id="after-sub-second-truncated-never-rounds-up-to-a-fire-time",
        ),
        pytest.param(
            cron("30 2 * * *", NY),
            datetime(2026, 3, 8, 3, 20, tzinfo=timezone(timedelta(hours=-4))),
            utc(2026, 3, 8, 7, 30),
            id="after-in-any-offset",
        ),
    ],
)
def test_bounds_and_resolution(
    trigger: CronTrigger, after: datetime, expected: datetime | None
) -> None:
    assert trigger.next_fire_time(after) == expected


def test_end_equal_to_start_fires_once() -> None:
    once = cron("0 * * * *", start_at=utc(2026, 1, 1, 5), end_at=utc(2026, 1, 1, 5))
    assert fire_times(once, utc(2026, 1, 1), 5) == [utc(2026, 1, 1, 5)]


def test_far_past_and_far_future() -> None:
    assert cron("0 0 1 1 *").next_fire_time(utc(1, 1, 2)) == utc(2, 1, 1)
    assert cron("0 0 1 1 *").next_fire_time(utc(9999, 6, 1)) is None
