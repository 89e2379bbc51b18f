"""Cron triggers where croniter is wrong: each row shows its answer and the corrected one."""

from __future__ import annotations

from datetime import datetime

import pytest
from croniter import croniter
from pydantic import ValidationError

from domain.triggers import fire_times
from tests.domain.cron_support import APIA, HAVANA, LORD_HOWE, NY, UTC, cron, utc

CRONITER_DISAGREEMENTS = [
    # (expression, zone, after, what croniter says, what the contract says)
    pytest.param(
        "30 2 * * *",
        NY,
        utc(2026, 3, 7, 12),
        utc(2026, 3, 8, 7),
        utc(2026, 3, 8, 7, 30),
        id="croniter-fix-gap-time-snaps-to-transition",
    ),
    pytest.param(
        "30 2 * * *",
        NY,
        utc(2026, 3, 8, 7, 10),
        utc(2026, 3, 9, 6, 30),
        utc(2026, 3, 8, 7, 30),
        id="croniter-fix-gap-time-lost-right-after-the-jump",
    ),
    pytest.param(
        "30 1 * * *",
        NY,
        utc(2026, 11, 1, 5, 30),
        utc(2026, 11, 1, 6, 30),
        utc(2026, 11, 2, 6, 30),
        id="croniter-fix-daily-fires-twice-in-repeated-hour",
    ),
    pytest.param(
        "0 0-22 * * *",
        NY,
        utc(2026, 11, 1, 5, 30),
        utc(2026, 11, 1, 6),
        utc(2026, 11, 1, 7),
        id="croniter-fix-partial-hours-fire-twice-in-repeated-hour",
    ),
    pytest.param(
        "15 2 * * *",
        LORD_HOWE,
        utc(2026, 10, 3),
        utc(2026, 10, 3, 15, 30),
        utc(2026, 10, 3, 15, 45),
        id="croniter-fix-lord-howe-half-hour-gap",
    ),
    pytest.param(
        "45 1 * * *",
        LORD_HOWE,
        utc(2026, 4, 4, 14, 45),
        utc(2026, 4, 4, 15, 15),
        utc(2026, 4, 5, 15, 15),
        id="croniter-fix-lord-howe-half-hour-fold",
    ),
    pytest.param(
        "0 0 * * *",
        HAVANA,
        utc(2026, 11, 1, 4),
        utc(2026, 11, 1, 5),
        utc(2026, 11, 2, 5),
        id="croniter-fix-havana-midnight-fires-twice",
    ),
    pytest.param(
        "0 9 * * *",
        APIA,
        utc(2011, 12, 29, 19),
        utc(2011, 12, 30, 10),
        utc(2011, 12, 30, 19),
        id="croniter-fix-apia-skipped-day",
    ),
]


@pytest.mark.parametrize(
    ("expression", "zone", "after", "croniter_says", "expected"), CRONITER_DISAGREEMENTS
)
def test_croniter_disagreements_are_corrected(
    expression: str, zone: str, after: datetime, croniter_says: datetime, expected: datetime
) -> None:
    from zoneinfo import ZoneInfo

    stepper = croniter(expression, after.astimezone(ZoneInfo(zone)), ret_type=datetime)
    # the bug this row corrects (compared in UTC: PEP 495 makes a fold=1 time unequal)
    assert stepper.get_next(datetime).astimezone(UTC) == croniter_says
    assert cron(expression, zone).next_fire_time(after) == expected


def test_croniter_fix_single_value_range() -> None:
    assert croniter.expand("5-5 * * * *")[0][0] == ["*"]  # croniter: every minute
    assert cron("5-5 * * * *").next_fire_time(utc(2026, 1, 1, 0, 6)) == utc(2026, 1, 1, 1, 5)


def test_croniter_fix_star_one_day_field_counts_as_restricted() -> None:
    # croniter sees `*/1` as `*` and ANDs the day fields; crontab(5) ORs them.
    stepper = croniter("0 0 */1 * */2", datetime(2026, 4, 1), ret_type=datetime)
    assert stepper.get_next(datetime) == datetime(2026, 4, 2)  # Thursday
    assert stepper.get_next(datetime) == datetime(2026, 4, 4)  # skips Friday the 3rd
    expected = [utc(2026, 4, 2), utc(2026, 4, 3), utc(2026, 4, 4)]
    assert fire_times(cron("0 0 */1 * */2"), utc(2026, 4, 1), 3) == expected


def test_croniter_fix_seconds_field_leads() -> None:
    # croniter's own six-field form puts seconds last.
    stepper = croniter("5 0 * * * *", datetime(2026, 1, 1), ret_type=datetime)
    assert stepper.get_next(datetime) == datetime(2026, 1, 1, 0, 5)
    assert cron("5 0 * * * *").next_fire_time(utc(2026, 1, 1)) == utc(2026, 1, 1, 0, 0, 5)


@pytest.mark.parametrize("expression", ["0 22-2 * * *", "0 0 15W * *", "0 0 ? * 1", "0 0 30 2 *"])
def test_croniter_fix_rejects_what_croniter_accepts(expression: str) -> None:
    croniter(expression)  # croniter takes it
    with pytest.raises(ValidationError):
        cron(expression)
