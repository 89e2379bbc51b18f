"""Cron triggers: docs/triggers.md ("Cron") rule by rule, with instants worked out by hand.

Transitions used (from zoneinfo, 2026 unless said):
- America/New_York: 03-08 02:00 EST -> 03:00 EDT (07:00Z); 11-01 02:00 EDT -> 01:00 EST (06:00Z)
- Europe/London: 03-29 01:00 GMT -> 02:00 BST (01:00Z); 10-25 02:00 BST -> 01:00 GMT (01:00Z)
- Australia/Lord_Howe (30 min): 10-04 02:00 +10:30 -> 02:30 +11 (10-03 15:30Z);
  04-05 02:00 +11 -> 01:30 +10:30 (04-04 15:00Z)
- America/Santiago (midnight): 04-05 00:00 -03 -> 04-04 23:00 -04 (04-05 03:00Z);
  09-06 00:00 -04 -> 01:00 -03 (09-06 04:00Z)
- America/Havana (midnight): 03-08 00:00 -05 -> 01:00 -04 (05:00Z); 11-01 01:00 -04 -> 00:00 -05
  (05:00Z)
- Pacific/Apia: 2011-12-29 23:59:59 -10 -> 2011-12-31 00:00 +14 (2011-12-30 10:00Z)
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import pytest
from croniter import croniter
from pydantic import ValidationError

from domain.triggers import TRIGGER_ADAPTER, CronTrigger, fire_times

UTC = timezone.utc
NY = "America/New_York"
LONDON = "Europe/London"
LORD_HOWE = "Australia/Lord_Howe"
SANTIAGO = "America/Santiago"
HAVANA = "America/Havana"
APIA = "Pacific/Apia"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def cron(expression: str, zone: str = "UTC", **bounds: datetime) -> CronTrigger:
    return CronTrigger(expression=expression, timezone=zone, **bounds)


DST_ROWS = [
    # -- gap: read with the offset before the transition, i.e. moved forward by the gap
    pytest.param(
        "30 2 * * *",
        NY,
        utc(2026, 3, 7, 12),
        [utc(2026, 3, 8, 7, 30), utc(2026, 3, 9, 6, 30)],
        id="gap-new-york-0230-fires-at-0330-edt",
    ),
    pytest.param(
        "0 2 * * *",
        NY,
        utc(2026, 3, 7, 12),
        [utc(2026, 3, 8, 7), utc(2026, 3, 9, 6)],
        id="gap-new-york-0200-fires-at-0300-edt",
    ),
    pytest.param(
        "*/30 * * * *",
        NY,
        utc(2026, 3, 8, 6, 15),
        [utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 7), utc(2026, 3, 8, 7, 30), utc(2026, 3, 8, 8)],
        id="gap-several-wall-times-on-one-instant-fire-once",
    ),
    pytest.param(
        "10,30 2,3 * * *",
        NY,
        utc(2026, 3, 8, 6, 15),
        [utc(2026, 3, 8, 7, 10), utc(2026, 3, 8, 7, 30), utc(2026, 3, 9, 6, 10)],
        id="gap-0210-and-0310-land-on-one-instant",
    ),
    pytest.param(
        "30 2 * * *",
        NY,
        utc(2026, 3, 8, 7, 10),
        [utc(2026, 3, 8, 7, 30), utc(2026, 3, 9, 6, 30)],
        id="gap-after-already-past-the-jump-still-gets-the-skipped-time",
    ),
    pytest.param(
        "30 1 * * *",
        LONDON,
        utc(2026, 3, 28, 12),
        [utc(2026, 3, 29, 1, 30), utc(2026, 3, 30, 0, 30)],
        id="gap-london-0130-fires-at-0230-bst",
    ),
    pytest.param(
        "15 2 * * *",
        LORD_HOWE,
        utc(2026, 10, 3),
        [utc(2026, 10, 3, 15, 45), utc(2026, 10, 4, 15, 15)],
        id="gap-lord-howe-half-hour-0215-fires-at-0245",
    ),
    pytest.param(
        "*/15 * * * *",
        LORD_HOWE,
        utc(2026, 10, 3, 15, 10),
        [
            utc(2026, 10, 3, 15, 15),
            utc(2026, 10, 3, 15, 30),
            utc(2026, 10, 3, 15, 45),
            utc(2026, 10, 3, 16),
        ],
        id="gap-lord-howe-quarter-hours-merge-with-the-half-hour-after",
    ),
    pytest.param(
        "0 0 * * *",
        SANTIAGO,
        utc(2026, 9, 5, 12),
        [utc(2026, 9, 6, 4), utc(2026, 9, 7, 3)],
        id="gap-santiago-missing-midnight-fires-at-0100",
    ),
    pytest.param(
        "30 0 * * *",
        SANTIAGO,
        utc(2026, 9, 5, 12),
        [utc(2026, 9, 6, 4, 30), utc(2026, 9, 7, 3, 30)],
        id="gap-santiago-0030-fires-at-0130",
    ),
    pytest.param(
        "0 0 * * *",
        HAVANA,
        utc(2026, 3, 7, 12),
        [utc(2026, 3, 8, 5), utc(2026, 3, 9, 4)],
        id="gap-havana-missing-midnight",
    ),
    pytest.param(
        "0 9 * * *",
        APIA,
        utc(2011, 12, 28),
        [
            utc(2011, 12, 28, 19),
            utc(2011, 12, 29, 19),
            utc(2011, 12, 30, 19),
            utc(2011, 12, 31, 19),
        ],
        id="gap-apia-skipped-day-fires-once-on-the-instant-of-the-next",
    ),
    pytest.param(
        "0 12 30 12 *",
        APIA,
        utc(2011, 6, 1),
        [utc(2011, 12, 30, 22), utc(2012, 12, 29, 22)],
        id="gap-apia-yearly-on-the-skipped-day",
    ),
    pytest.param(
        "0 * * * *",
        APIA,
        utc(2011, 12, 30, 9, 30),
        [utc(2011, 12, 30, 10), utc(2011, 12, 30, 11), utc(2011, 12, 30, 12)],
        id="gap-apia-hourly-keeps-its-cadence-across-the-lost-day",
    ),
    # -- fold: once at the first instant, unless the hour field matches every hour
    pytest.param(
        "30 1 * * *",
        NY,
        utc(2026, 10, 31, 12),
        [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)],
        id="fold-new-york-daily-fires-once-at-first-instant",
    ),
    pytest.param(
        "15 1 * * *",
        NY,
        utc(2026, 11, 1, 6, 5),
        [utc(2026, 11, 2, 6, 15)],
        id="fold-daily-never-fires-on-the-second-pass",
    ),
    pytest.param(
        "0 0-22 * * *",
        NY,
        utc(2026, 11, 1, 5, 30),
        [utc(2026, 11, 1, 7), utc(2026, 11, 1, 8)],
        id="fold-hour-field-missing-one-hour-fires-once",
    ),
    pytest.param(
        "0 * * * *",
        NY,
        utc(2026, 11, 1, 4, 30),
        [utc(2026, 11, 1, 5), utc(2026, 11, 1, 6), utc(2026, 11, 1, 7)],
        id="fold-hourly-star-fires-at-both-instants",
    ),
    pytest.param(
        "0 */1 * * *",
        NY,
        utc(2026, 11, 1, 4, 30),
        [utc(2026, 11, 1, 5), utc(2026, 11, 1, 6), utc(2026, 11, 1, 7)],
        id="fold-hour-step-one-fires-at-both-instants",
    ),
    pytest.param(
        "0,30 0-23 * * *",
        NY,
        utc(2026, 11, 1, 5, 45),
        [utc(2026, 11, 1, 6), utc(2026, 11, 1, 6, 30), utc(2026, 11, 1, 7)],
        id="fold-hour-range-0-23-fires-at-both-instants",
    ),
    pytest.param(
        "0 0-11,12-23 * * *",
        NY,
        utc(2026, 11, 1, 5, 30),
        [utc(2026, 11, 1, 6), utc(2026, 11, 1, 7)],
        id="fold-hour-list-covering-all-hours-fires-at-both-instants",
    ),
    pytest.param(
        "*/20 * * * *",
        NY,
        utc(2026, 11, 1, 5, 50),
        [
            utc(2026, 11, 1, 6),
            utc(2026, 11, 1, 6, 20),
            utc(2026, 11, 1, 6, 40),
            utc(2026, 11, 1, 7),
        ],
        id="fold-every-20-minutes-after-first-pass-repeats-the-hour",
    ),
    pytest.param(
        "30 1 * * *",
        LONDON,
        utc(2026, 10, 24, 12),
        [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)],
        id="fold-london-daily-fires-once",
    ),
    pytest.param(
        "*/30 * * * *",
        LONDON,
        utc(2026, 10, 25, 0, 15),
        [
            utc(2026, 10, 25, 0, 30),
            utc(2026, 10, 25, 1),
            utc(2026, 10, 25, 1, 30),
            utc(2026, 10, 25, 2),
        ],
        id="fold-london-half-hourly-keeps-real-time-cadence",
    ),
    pytest.param(
        "45 1 * * *",
        LORD_HOWE,
        utc(2026, 4, 4),
        [utc(2026, 4, 4, 14, 45), utc(2026, 4, 5, 15, 15)],
        id="fold-lord-howe-half-hour-fires-once",
    ),
    pytest.param(
        "*/15 * * * *",
        LORD_HOWE,
        utc(2026, 4, 4, 14, 10),
        [
            utc(2026, 4, 4, 14, 15),
            utc(2026, 4, 4, 14, 30),
            utc(2026, 4, 4, 14, 45),
            utc(2026, 4, 4, 15),
            utc(2026, 4, 4, 15, 15),
            utc(2026, 4, 4, 15, 30),
        ],
        id="fold-lord-howe-quarter-hours-repeat-the-half-hour",
    ),
    pytest.param(
        "30 23 * * *",
        SANTIAGO,
        utc(2026, 4, 4, 12),
        [utc(2026, 4, 5, 2, 30), utc(2026, 4, 6, 3, 30)],
        id="fold-santiago-2330-before-midnight-change-fires-once",
    ),
    pytest.param(
        "0 * * * *",
        SANTIAGO,
        utc(2026, 4, 5, 1, 30),
        [utc(2026, 4, 5, 2), utc(2026, 4, 5, 3), utc(2026, 4, 5, 4)],
        id="fold-santiago-hourly-fires-at-both-2300s",
    ),
    pytest.param(
        "0 0 * * *",
        SANTIAGO,
        utc(2026, 4, 4, 12),
        [utc(2026, 4, 5, 4), utc(2026, 4, 6, 4)],
        id="fold-santiago-midnight-after-the-change-exists-once",
    ),
    pytest.param(
        "0 0 * * *",
        HAVANA,
        utc(2026, 10, 31, 12),
        [utc(2026, 11, 1, 4), utc(2026, 11, 2, 5)],
        id="fold-havana-repeated-midnight-fires-once",
    ),
]


@pytest.mark.parametrize(("expression", "zone", "after", "expected"), DST_ROWS)
def test_dst_gap_and_fold_rules(
    expression: str, zone: str, after: datetime, expected: list[datetime]
) -> None:
    assert fire_times(cron(expression, zone), after, len(expected)) == expected


FIELD_ROWS = [
    # -- Vixie rule: both day fields restricted -> either matches (April 2026: Apr 1 is Wed)
    pytest.param(
        "0 0 13 * 5",
        utc(2026, 4, 1),
        [utc(2026, 4, 3), utc(2026, 4, 10), utc(2026, 4, 13), utc(2026, 4, 17)],
        id="vixie-day-of-month-or-day-of-week",
    ),
    pytest.param(
        "0 0 13 * *",
        utc(2026, 4, 1),
        [utc(2026, 4, 13), utc(2026, 5, 13)],
        id="vixie-day-of-week-star-means-day-of-month-alone",
    ),
    pytest.param(
        "0 0 * * 5",
        utc(2026, 4, 1),
        [utc(2026, 4, 3), utc(2026, 4, 10)],
        id="vixie-day-of-month-star-means-day-of-week-alone",
    ),
    pytest.param(
        "0 0 */2 * 1",
        utc(2026, 4, 1),
        [utc(2026, 4, 3), utc(2026, 4, 5), utc(2026, 4, 6), utc(2026, 4, 7)],
        id="vixie-step-star-counts-as-restricted",
    ),
    pytest.param(
        "0 0 * * */2",
        utc(2026, 4, 1),
        [utc(2026, 4, 2), utc(2026, 4, 4), utc(2026, 4, 5), utc(2026, 4, 7)],
        id="vixie-step-star-weekday-with-star-day-is-weekday-alone",
    ),
    # -- fields, names, lists, ranges, steps
    pytest.param("0 12 * * 7", utc(2026, 4, 1), [utc(2026, 4, 5, 12)], id="weekday-7-is-sunday"),
    pytest.param("0 12 * * 0", utc(2026, 4, 1), [utc(2026, 4, 5, 12)], id="weekday-0-is-sunday"),
    pytest.param(
        "0 12 * * 7/2",
        utc(2026, 4, 1),
        [utc(2026, 4, 5, 12), utc(2026, 4, 12, 12)],
        id="weekday-7-with-step-is-sunday-alone",
    ),
    pytest.param(
        "0 12 * * fri-SUN",
        utc(2026, 4, 1),
        [utc(2026, 4, 3, 12), utc(2026, 4, 4, 12), utc(2026, 4, 5, 12), utc(2026, 4, 10, 12)],
        id="names-any-case-and-range-ending-on-sunday",
    ),
    pytest.param(
        "0 9 1 Jan,jul,OCT *",
        utc(2026, 2, 1),
        [utc(2026, 7, 1, 9), utc(2026, 10, 1, 9), utc(2027, 1, 1, 9)],
        id="month-names-list",
    ),
    pytest.param(
        "0 9 * * MON-FRI",
        utc(2026, 4, 3, 10),
        [utc(2026, 4, 6, 9), utc(2026, 4, 7, 9)],
        id="weekday-name-range",
    ),
    pytest.param(
        "5-5 * * * *",
        utc(2026, 4, 1, 10, 7),
        [utc(2026, 4, 1, 11, 5), utc(2026, 4, 1, 12, 5)],
        id="single-value-range-is-that-value",
    ),
    pytest.param(
        "0 0 1 jan-jan *",
        utc(2026, 4, 1),
        [utc(2027, 1, 1)],
        id="single-value-name-range-is-that-value",
    ),
    pytest.param(
        "0 0 * * sun-sun",
        utc(2026, 4, 1),
        [utc(2026, 4, 5), utc(2026, 4, 12)],
        id="single-value-sunday-range-is-sunday",
    ),
    pytest.param(
        "10-40/15 * * * *",
        utc(2026, 4, 1, 10),
        [
            utc(2026, 4, 1, 10, 10),
            utc(2026, 4, 1, 10, 25),
            utc(2026, 4, 1, 10, 40),
            utc(2026, 4, 1, 11, 10),
        ],
        id="range-with-step",
    ),
    pytest.param(
        "10/20 * * * *",
        utc(2026, 4, 1, 10),
        [utc(2026, 4, 1, 10, 10), utc(2026, 4, 1, 10, 30), utc(2026, 4, 1, 10, 50)],
        id="start-with-step-runs-to-field-end",
    ),
    pytest.param(
        "59/15 * * * *",
        utc(2026, 4, 1, 10),
        [utc(2026, 4, 1, 10, 59), utc(2026, 4, 1, 11, 59)],
        id="start-with-step-at-field-end-is-one-value",
    ),
    pytest.param(
        "0 0 31 * *",
        utc(2026, 1, 31, 1),
        [utc(2026, 3, 31), utc(2026, 5, 31), utc(2026, 7, 31)],
        id="month-end-day-31-skips-short-months",
    ),
    pytest.param(
        "0 0 29 2 *",
        utc(2026, 1, 1),
        [utc(2028, 2, 29), utc(2032, 2, 29)],
        id="leap-day-fires-in-leap-years-only",
    ),
    pytest.param(
        "0 0 29 2 *",
        utc(2096, 3, 1),
        [utc(2104, 2, 29)],
        id="leap-day-skips-2100",
    ),
    pytest.param("  0   12\t* * *  ", utc(2026, 4, 1), [utc(2026, 4, 1, 12)], id="whitespace"),
    # -- macros
    pytest.param("@yearly", utc(2026, 6, 1), [utc(2027, 1, 1)], id="macro-yearly"),
    pytest.param("@annually", utc(2026, 6, 1), [utc(2027, 1, 1)], id="macro-annually"),
    pytest.param("@monthly", utc(2026, 6, 1), [utc(2026, 7, 1)], id="macro-monthly"),
    pytest.param("@weekly", utc(2026, 6, 1), [utc(2026, 6, 7)], id="macro-weekly-sunday"),
    pytest.param("@daily", utc(2026, 6, 1), [utc(2026, 6, 2)], id="macro-daily"),
    pytest.param("@midnight", utc(2026, 6, 1), [utc(2026, 6, 2)], id="macro-midnight"),
    pytest.param("@hourly", utc(2026, 6, 1), [utc(2026, 6, 1, 1)], id="macro-hourly"),
    pytest.param("@DAILY", utc(2026, 6, 1), [utc(2026, 6, 2)], id="macro-any-case"),
    # -- six fields: a leading seconds field
    pytest.param(
        "30 0 9 * * *",
        utc(2026, 6, 1),
        [utc(2026, 6, 1, 9, 0, 30), utc(2026, 6, 2, 9, 0, 30)],
        id="six-fields-seconds-lead",
    ),
    pytest.param(
        "5 0 * * * *",
        utc(2026, 6, 1),
        [utc(2026, 6, 1, 0, 0, 5), utc(2026, 6, 1, 1, 0, 5)],
        id="six-fields-second-5-minute-0-not-croniters-minute-5",
    ),
    pytest.param(
        "*/20 * * * * *",
        utc(2026, 6, 1, 10, 0, 5),
        [utc(2026, 6, 1, 10, 0, 20), utc(2026, 6, 1, 10, 0, 40), utc(2026, 6, 1, 10, 1)],
        id="six-fields-every-20-seconds",
    ),
]


@pytest.mark.parametrize(("expression", "after", "expected"), FIELD_ROWS)
def test_fields(expression: str, after: datetime, expected: list[datetime]) -> None:
    assert fire_times(cron(expression), after, len(expected)) == expected


@pytest.mark.parametrize(
    ("expression", "zone", "after", "expected"),
    [
        pytest.param(
            "15 30 2 * * *",
            NY,
            utc(2026, 3, 7, 12),
            [utc(2026, 3, 8, 7, 30, 15)],
            id="six-fields-gap",
        ),
        pytest.param(
            "0 30 1 * * *",
            NY,
            utc(2026, 10, 31, 12),
            [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)],
            id="six-fields-fold-once",
        ),
        pytest.param(
            "0 0 * * * *",
            NY,
            utc(2026, 11, 1, 4, 30),
            [utc(2026, 11, 1, 5), utc(2026, 11, 1, 6), utc(2026, 11, 1, 7)],
            id="six-fields-hourly-fold-both",
        ),
    ],
)
def test_six_fields_follow_the_dst_rules(
    expression: str, zone: str, after: datetime, expected: list[datetime]
) -> None:
    assert fire_times(cron(expression, zone), after, len(expected)) == expected


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


INVALID_EXPRESSIONS = [
    pytest.param("* * * *", "expected 5 fields", id="too-few-fields"),
    pytest.param("", "got 0", id="empty"),
    pytest.param("0 0 1 1 * 2030 x", "got 7", id="year-field-rejected"),
    pytest.param("60 * * * *", "minute field: 60 is out of range 0-59", id="minute-range"),
    pytest.param("0 25 * * *", "hour field: 25 is out of range 0-23", id="hour-range"),
    pytest.param("0 0 0 * *", "day-of-month field: 0 is out of range 1-31", id="day-zero"),
    pytest.param("0 0 32 * *", "day-of-month field: 32 is out of range 1-31", id="day-32"),
    pytest.param("0 0 * 13 *", "month field: 13 is out of range 1-12", id="month-range"),
    pytest.param("0 0 * * 8", "day-of-week field: 8 is out of range 0-7", id="weekday-range"),
    pytest.param("60 0 0 * * *", "second field: 60 is out of range 0-59", id="second-range"),
    pytest.param("0 22-2 * * *", "hour field: range 22-2 runs downward", id="descending-range"),
    pytest.param(
        "0 0 * * fri-mon",
        "day-of-week field: range fri-mon runs downward",
        id="descending-name-range",
    ),
    pytest.param("*/0 * * * *", "minute field: step '0' is not a positive number", id="step-0"),
    pytest.param("*/x * * * *", "minute field: step 'x'", id="step-not-a-number"),
    pytest.param("1,,2 * * * *", "minute field: empty item", id="empty-list-item"),
    pytest.param("a * * * *", "minute field: 'a' is not a number", id="not-a-number"),
    pytest.param("-5 * * * *", "minute field: '-5' is not a valid range", id="negative"),
    pytest.param("1-2-3 * * * *", "minute field: '1-2-3' is not a valid range", id="two-dashes"),
    pytest.param(
        "0 0 * JANUARY *", "month field: 'JANUARY' is not a number or a name", id="long-month-name"
    ),
    pytest.param("0 0 * * monday", "day-of-week field: 'monday'", id="long-day-name"),
    pytest.param("0 jan * * *", "hour field: 'jan' is not a number", id="name-in-hour"),
    pytest.param("0 L * * *", "hour field: 'L' uses 'L' (last)", id="L-in-hour-rejected"),
    pytest.param("0 0 * * L", "day-of-week field: 'L' uses 'L' (last)", id="bare-L-in-weekday"),
    pytest.param("0 0 5L * *", "day-of-month field: '5L' uses 'L'", id="DL-in-day-of-month"),
    pytest.param("0 0 L/2 * *", "day-of-month field: 'L' is not a number", id="L-with-step"),
    pytest.param("0 0 L-31 * *", "day-of-month field: in 'L-31', N must be 1-30", id="L-31"),
    pytest.param("0 0 L-0 * *", "day-of-month field: in 'L-0', N must be 1-30", id="L-0"),
    pytest.param("0 0 15W * *", "'W' (nearest weekday)", id="W-rejected"),
    pytest.param("0 0 LW * *", "day-of-month field: 'LW' uses 'W'", id="LW-rejected"),
    pytest.param("0 0 1#2 * *", "day-of-month field: '1#2' uses '#'", id="hash-in-day-of-month"),
    pytest.param("0 0 * * MON#6", "day-of-week field: in 'MON#6', N must be 1-5", id="MON#6"),
    pytest.param("0 0 * * MON#0", "day-of-week field: in 'MON#0', N must be 1-5", id="MON#0"),
    pytest.param("0 0 * * 8#1", "day-of-week field: 8 is out of range", id="hash-bad-day"),
    pytest.param("0 0 * * FUNL", "day-of-week field: 'FUN' is not a number", id="DL-bad-name"),
    pytest.param("0 0 L-30 2 *", "L-30 is before the first day", id="L-30-in-February"),
    pytest.param("0 0 ? * 1", "'?' (no specific value)", id="question-mark-rejected"),
    pytest.param("H * * * *", "'H' (hashed value)", id="H-rejected"),
    pytest.param("H/5 * * * *", "'H' (hashed value)", id="H-step-rejected"),
    pytest.param("R * * * *", "'R' (random value)", id="R-rejected"),
    pytest.param("@reboot", "unknown macro '@reboot'", id="reboot-rejected"),
    pytest.param("@fortnightly", "unknown macro", id="unknown-macro"),
    pytest.param(
        "0 0 30 2 *",
        "day-of-month field: day 30 never occurs in February",
        id="never-fires-february-30",
    ),
    pytest.param("0 0 31 4,6 *", "day 31 never occurs in April, June", id="never-fires-31st"),
    pytest.param("0 0 30,31 2 *", "days 30, 31 never occur in February", id="never-fires-list"),
    pytest.param("0 0 0 30 2 *", "can never fire", id="never-fires-six-fields"),
]


@pytest.mark.parametrize(("expression", "message"), INVALID_EXPRESSIONS)
def test_invalid_expression_is_a_validation_error_naming_the_field(
    expression: str, message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        TRIGGER_ADAPTER.validate_python({"kind": "cron", "expression": expression})
    [error] = caught.value.errors()
    assert error["loc"] == ("cron", "expression")
    assert message in error["msg"]


@pytest.mark.parametrize(
    "expression",
    [
        pytest.param("0 0 29 2 *", id="february-29-fires-in-leap-years"),
        pytest.param("0 0 30 2 1", id="impossible-day-with-weekday-fires-on-february-mondays"),
        pytest.param("0 0 31 2,3 *", id="one-month-has-the-day"),
        pytest.param("*/100 * * * *", id="step-longer-than-field-is-its-start"),
    ],
)
def test_expressions_that_can_fire_are_accepted(expression: str) -> None:
    assert cron(expression).next_fire_time(utc(2026, 1, 1)) is not None


def test_never_firing_rule_still_allows_the_either_day_rule() -> None:
    # 30 February never comes, but with a weekday the day fields are ORed: every Monday
    # of February (the month field still applies).
    expected = [utc(2027, 2, 1), utc(2027, 2, 8)]
    assert fire_times(cron("0 0 30 2 1"), utc(2026, 4, 1), 2) == expected


def test_unknown_timezone_is_a_validation_error_naming_the_field() -> None:
    with pytest.raises(ValidationError) as caught:
        TRIGGER_ADAPTER.validate_python(
            {"kind": "cron", "expression": "* * * * *", "timezone": "Mars/Olympus_Mons"}
        )
    [error] = caught.value.errors()
    assert error["loc"] == ("cron", "timezone")
    assert "unknown time zone 'Mars/Olympus_Mons'" in error["msg"]


def test_end_before_start_is_a_validation_error_naming_end_at() -> None:
    with pytest.raises(ValidationError) as caught:
        TRIGGER_ADAPTER.validate_python(
            {
                "kind": "cron",
                "expression": "* * * * *",
                "start_at": "2026-01-02T00:00:00Z",
                "end_at": "2026-01-01T00:00:00Z",
            }
        )
    [error] = caught.value.errors()
    assert error["loc"] == ("cron", "end_at")
    assert "is before start_at" in error["msg"]


def test_end_equal_to_start_fires_once() -> None:
    once = cron("0 * * * *", start_at=utc(2026, 1, 1, 5), end_at=utc(2026, 1, 1, 5))
    assert fire_times(once, utc(2026, 1, 1), 5) == [utc(2026, 1, 1, 5)]


def test_far_past_and_far_future() -> None:
    assert cron("0 0 1 1 *").next_fire_time(utc(1, 1, 2)) == utc(2, 1, 1)
    assert cron("0 0 1 1 *").next_fire_time(utc(9999, 6, 1)) is None


def test_tzdata_keeps_the_assumptions_the_search_relies_on() -> None:
    """The cron search looks 27 h around an instant and expects at most one transition
    in 54 h, and no shift of 27 h or more (docs/triggers.md). Check every zone."""
    from zoneinfo import _zoneinfo, available_timezones  # type: ignore[attr-defined]

    closest, largest = timedelta.max, timedelta(0)
    for key in available_timezones():
        info = _zoneinfo.ZoneInfo.no_cache(key)
        if not hasattr(info, "_trans_utc"):
            pytest.skip("this Python's pure zoneinfo keeps its transitions elsewhere")
        offsets = [info._tti_before or (info._ttinfos or [None])[0], *info._ttinfos]
        changes = [
            (moment, abs(after.utcoff - before.utcoff))
            for moment, before, after in zip(info._trans_utc, offsets, offsets[1:], strict=False)
            if before is not None and after.utcoff != before.utcoff
        ]
        for (first, _), (second, _) in itertools.pairwise(changes):
            closest = min(closest, timedelta(seconds=second - first))
        largest = max([largest, *(shift for _, shift in changes)])
    assert closest > timedelta(hours=54)
    assert largest < timedelta(hours=27)
