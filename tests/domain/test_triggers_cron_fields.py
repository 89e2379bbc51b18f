"""Cron triggers: the fields (docs/triggers.md, "Cron") rule by rule, worked out by hand."""

from __future__ import annotations

from datetime import datetime

import pytest

from domain.triggers import fire_times
from tests.domain.cron_support import cron, utc

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
        "0 0 * * 0-SUN",
        utc(2026, 1, 1),
        [utc(2026, 1, 2), utc(2026, 1, 3), utc(2026, 1, 4)],
        id="zero-to-sun-is-every-day",
    ),
    pytest.param(
        "0 0 * * 0-sun/2",
        utc(2026, 1, 1),
        [utc(2026, 1, 3), utc(2026, 1, 4), utc(2026, 1, 6)],
        id="zero-to-sun-with-step-counts-sun-as-7",
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
