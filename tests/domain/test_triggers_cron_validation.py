"""Cron triggers: what validation rejects, naming the field, and what it accepts."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from domain.triggers import TRIGGER_ADAPTER, CronTrigger, fire_times
from tests.domain.cron_support import cron, utc

INVALID_EXPRESSIONS = [
    pytest.param("* * * *", "expected 5 fields", id="too-few-fields"),
    pytest.param("", "got 0", id="empty"),
    pytest.param("0 0 1 1 * 2030 x", "got 7", id="year-field-rejected"),
    pytest.param(
        "0 0 1 1 * 2026", "2026 reads as a year, which cron has no field for", id="year-as-sixth"
    ),
    pytest.param("0 0 1 1 * 2026-2028", "reads as a year", id="year-range-as-sixth"),
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
    pytest.param("0 " + ",".join(["1"] * 500) + " * * *", "at most 1000", id="over-1000-chars"),
]


def test_an_expression_of_1000_characters_is_accepted() -> None:
    expression = "0 " + ",".join(["1"] * 495) + "  * * *"
    expression += " " * (1000 - len(expression))
    trigger = TRIGGER_ADAPTER.validate_python({"kind": "cron", "expression": expression})
    assert isinstance(trigger, CronTrigger)
    assert len(trigger.expression) == 1000


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
