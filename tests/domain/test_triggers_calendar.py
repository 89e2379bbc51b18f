"""Calendar triggers: start_date + k * interval at a wall time (docs/triggers.md, "Calendar")."""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from domain.triggers import TRIGGER_ADAPTER, CalendarTrigger, fire_times
from tests.domain.cron_support import utc

UTC = timezone.utc


def calendar(**fields: Any) -> CalendarTrigger:
    return CalendarTrigger(**fields)


ROWS = [
    # -- month arithmetic from the anchor, never chained
    pytest.param(
        calendar(months=1, hour=9, start_date=date(2026, 1, 31)),
        utc(2026, 1, 1),
        [
            utc(2026, 1, 31, 9),
            utc(2026, 2, 28, 9),
            utc(2026, 3, 31, 9),
            utc(2026, 4, 30, 9),
            utc(2026, 5, 31, 9),
        ],
        id="month-end-clamps-and-returns-to-the-31st",
    ),
    pytest.param(
        calendar(months=1, start_date=date(2024, 1, 31)),
        utc(2024, 2, 1),
        [utc(2024, 2, 29), utc(2024, 3, 31)],
        id="month-end-clamps-to-feb-29-in-leap-year",
    ),
    pytest.param(
        calendar(years=1, start_date=date(2024, 2, 29)),
        utc(2024, 1, 1),
        [utc(2024, 2, 29), utc(2025, 2, 28), utc(2026, 2, 28), utc(2027, 2, 28), utc(2028, 2, 29)],
        id="leap-day-yearly-clamps-then-returns-to-the-29th",
    ),
    pytest.param(
        calendar(months=3, start_date=date(2025, 11, 30)),
        utc(2025, 12, 1),
        [utc(2026, 2, 28), utc(2026, 5, 30), utc(2026, 8, 30)],
        id="quarterly-across-a-year-end",
    ),
    pytest.param(
        calendar(years=1, months=1, start_date=date(2024, 2, 29)),
        utc(2024, 3, 1),
        [utc(2025, 3, 29), utc(2026, 4, 29)],
        id="years-and-months-added-together-then-clamped-once",
    ),
    pytest.param(
        calendar(months=1, days=1, start_date=date(2026, 1, 31)),
        utc(2026, 2, 1),
        [utc(2026, 3, 1), utc(2026, 4, 2), utc(2026, 5, 3)],
        id="months-first-then-days",
    ),
    pytest.param(
        calendar(weeks=2, hour=8, start_date=date(2026, 1, 5)),
        utc(2026, 1, 5, 8),
        [utc(2026, 1, 19, 8), utc(2026, 2, 2, 8)],
        id="fortnightly",
    ),
    pytest.param(
        calendar(days=1, hour=23, minute=59, second=59, start_date=date(2026, 12, 31)),
        utc(2026, 12, 31, 23, 59, 59),
        [utc(2027, 1, 1, 23, 59, 59)],
        id="strictly-after-and-seconds",
    ),
    # -- gap and fold rules on the wall time
    pytest.param(
        calendar(
            days=1, hour=2, minute=30, timezone="America/New_York", start_date=date(2026, 3, 7)
        ),
        utc(2026, 3, 7),
        [utc(2026, 3, 7, 7, 30), utc(2026, 3, 8, 7, 30), utc(2026, 3, 9, 6, 30)],
        id="gap-new-york-0230-fires-at-0330-edt",
    ),
    pytest.param(
        calendar(
            days=1, hour=1, minute=30, timezone="America/New_York", start_date=date(2026, 10, 31)
        ),
        utc(2026, 10, 31),
        [utc(2026, 10, 31, 5, 30), utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)],
        id="fold-new-york-fires-once-at-first-instant",
    ),
    pytest.param(
        calendar(days=1, hour=1, minute=30, timezone="Europe/London", start_date=date(2026, 3, 28)),
        utc(2026, 3, 28),
        [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 30), utc(2026, 3, 30, 0, 30)],
        id="gap-london",
    ),
    pytest.param(
        calendar(
            days=1, hour=1, minute=30, timezone="Europe/London", start_date=date(2026, 10, 24)
        ),
        utc(2026, 10, 24),
        [utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)],
        id="fold-london",
    ),
    pytest.param(
        calendar(
            days=1, hour=2, minute=15, timezone="Australia/Lord_Howe", start_date=date(2026, 10, 3)
        ),
        utc(2026, 10, 1),
        [utc(2026, 10, 2, 15, 45), utc(2026, 10, 3, 15, 45), utc(2026, 10, 4, 15, 15)],
        id="gap-lord-howe-half-hour",
    ),
    pytest.param(
        calendar(
            days=1, hour=1, minute=45, timezone="Australia/Lord_Howe", start_date=date(2026, 4, 4)
        ),
        utc(2026, 4, 1),
        [utc(2026, 4, 3, 14, 45), utc(2026, 4, 4, 14, 45), utc(2026, 4, 5, 15, 15)],
        id="fold-lord-howe-half-hour",
    ),
    pytest.param(
        calendar(days=1, timezone="America/Santiago", start_date=date(2026, 9, 5)),
        utc(2026, 9, 1),
        [utc(2026, 9, 5, 4), utc(2026, 9, 6, 4), utc(2026, 9, 7, 3)],
        id="gap-santiago-missing-midnight",
    ),
    pytest.param(
        calendar(
            days=1, hour=23, minute=30, timezone="America/Santiago", start_date=date(2026, 4, 3)
        ),
        utc(2026, 4, 1),
        [utc(2026, 4, 4, 2, 30), utc(2026, 4, 5, 2, 30), utc(2026, 4, 6, 3, 30)],
        id="fold-santiago-before-midnight-change",
    ),
    pytest.param(
        calendar(days=1, timezone="America/Havana", start_date=date(2026, 10, 31)),
        utc(2026, 10, 30),
        [utc(2026, 10, 31, 4), utc(2026, 11, 1, 4), utc(2026, 11, 2, 5)],
        id="fold-havana-repeated-midnight",
    ),
    pytest.param(
        calendar(days=1, hour=9, timezone="Pacific/Apia", start_date=date(2011, 12, 28)),
        utc(2011, 12, 1),
        [
            utc(2011, 12, 28, 19),
            utc(2011, 12, 29, 19),
            utc(2011, 12, 30, 19),
            utc(2011, 12, 31, 19),
        ],
        id="gap-apia-skipped-day-and-the-next-share-an-instant-fire-once",
    ),
    # -- bounds and the start_date fallbacks
    pytest.param(
        calendar(days=1, hour=9, start_date=date(2026, 1, 1), start_at=utc(2026, 1, 5, 9)),
        utc(2025, 1, 1),
        [utc(2026, 1, 5, 9), utc(2026, 1, 6, 9)],
        id="start-at-inclusive-skips-earlier-dates",
    ),
    pytest.param(
        calendar(days=1, hour=9, start_date=date(2026, 1, 1), end_at=utc(2026, 1, 2, 9)),
        utc(2025, 1, 1),
        [utc(2026, 1, 1, 9), utc(2026, 1, 2, 9)],
        id="end-at-inclusive",
    ),
    pytest.param(
        calendar(weeks=1, hour=9, start_at=datetime(2026, 1, 7, 12, tzinfo=UTC)),
        utc(2025, 1, 1),
        [utc(2026, 1, 14, 9), utc(2026, 1, 21, 9)],
        id="no-start-date-anchors-on-start-at-local-date",
    ),
    pytest.param(
        calendar(weeks=1, timezone="Asia/Tokyo", start_at=utc(2026, 1, 6, 16)),
        utc(2025, 1, 1),
        [utc(2026, 1, 13, 15)],
        id="no-start-date-uses-start-at-date-in-the-trigger-zone",
    ),
    pytest.param(
        calendar(days=3),
        utc(2026, 1, 1),
        [utc(2026, 1, 4), utc(2026, 1, 7)],
        id="no-start-date-no-start-at-anchors-on-1970-01-01",
    ),
]


@pytest.mark.parametrize(("trigger", "after", "expected"), ROWS)
def test_fire_times(trigger: CalendarTrigger, after: datetime, expected: list[datetime]) -> None:
    assert fire_times(trigger, after, len(expected)) == expected


def test_end_at_stops_the_sequence() -> None:
    trigger = calendar(days=1, start_date=date(2026, 1, 1), end_at=utc(2026, 1, 3))
    assert fire_times(trigger, utc(2025, 12, 1), 10) == [
        utc(2026, 1, 1),
        utc(2026, 1, 2),
        utc(2026, 1, 3),
    ]


def test_far_from_the_anchor_is_computed_not_chained() -> None:
    trigger = calendar(months=1, start_date=date(1970, 1, 31))
    assert trigger.next_fire_time(utc(2026, 2, 1)) == utc(2026, 2, 28)
    assert trigger.next_fire_time(utc(2026, 2, 28)) == utc(2026, 3, 31)


def test_runs_out_at_year_9999() -> None:
    assert calendar(years=1, start_date=date(9999, 1, 1)).next_fire_time(utc(9999, 1, 2)) is None


@pytest.mark.parametrize(
    ("fields", "loc", "message"),
    [
        pytest.param({}, "days", "at least one of years, months, weeks, days", id="no-unit"),
        pytest.param(
            {"years": 0, "months": 0, "weeks": 0, "days": 0},
            "days",
            "at least one of years",
            id="all-units-zero",
        ),
        pytest.param({"days": -1}, "days", "greater than or equal to 0", id="negative-unit"),
        pytest.param({"days": 1, "hour": 24}, "hour", "less than or equal to 23", id="hour-24"),
        pytest.param({"days": 1, "minute": 60}, "minute", "less than or equal to 59", id="minute"),
        pytest.param({"days": 1, "second": -1}, "second", "greater than or equal", id="second"),
        pytest.param(
            {"days": 1, "timezone": "Nowhere/Land"},
            "timezone",
            "unknown time zone",
            id="unknown-zone",
        ),
        pytest.param(
            {"days": 1, "timezone": "localtime"},
            "timezone",
            "host's own zone",
            id="host-zone-alias",
        ),
        pytest.param(
            {"days": 1, "start_at": "2026-02-01T00:00:00Z", "end_at": "2026-01-31T23:59:59Z"},
            "end_at",
            "is before start_at",
            id="end-before-start",
        ),
        pytest.param({"days": 1, "weekday": 3}, "weekday", "Extra inputs", id="unknown-field"),
    ],
)
def test_validation_errors_name_the_field(fields: dict[str, Any], loc: str, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        TRIGGER_ADAPTER.validate_python({"kind": "calendar", **fields})
    [error] = caught.value.errors()
    assert error["loc"] == ("calendar", loc)
    assert message in error["msg"]
