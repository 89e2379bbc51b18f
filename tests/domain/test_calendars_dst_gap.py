"""A held date's wall time that the DST gap skips still rolls: the roll moves the wall
time to the nearest free date, and the DST rules then apply on that date
(docs/triggers.md, "Calendars"). Sunday 2026-03-08 is the night New York's clocks spring
forward from 02:00 to 03:00."""

from __future__ import annotations

from datetime import datetime

import pytest

from domain.calendars import Calendar
from domain.triggers import CalendarTrigger
from tests.domain import reference_triggers as reference
from tests.domain.test_calendars import at, cron, rows

HOLIDAY = Calendar(name="holiday", dates=["2026-03-08"])
NEW_YORK_SKIP = {"timezone": "America/New_York", "dst": {"gap": "skip"}}


@pytest.mark.parametrize(
    ("policy", "rolled"),
    [
        ("previous_business_day", "Sat 2026-03-07 07:30 rolled from 2026-03-08"),  # 02:30 EST
        ("next_business_day", "Mon 2026-03-09 06:30 rolled from 2026-03-08"),  # 02:30 EDT
    ],
)
def test_a_gap_skipped_wall_time_on_a_held_date_rolls_to_its_free_date(
    policy: str, rolled: str
) -> None:
    weekly = cron("30 2 * * SUN", policy, "holiday", **NEW_YORK_SKIP)
    fires, omitted = rows(weekly, "2026-03-02T12:00:00", 2, HOLIDAY)
    assert fires == [rolled, "Sun 2026-03-15 06:30"]
    assert omitted == []  # it did not fail to fire: it fired elsewhere
    # The naive reference, which lists a held date's wall times before any DST rule.
    expected = reference.calendared_cron_next(
        "30 2 * * SUN",
        "America/New_York",
        at("2026-03-02T12:00:00"),
        {datetime(2026, 3, 8).date()},
        set(),
        policy,
        gap="skip",
    )
    assert f"{expected:%a %Y-%m-%d %H:%M}" == rolled.split(" rolled")[0]


def test_on_a_free_date_the_gap_still_skips_the_wall_time() -> None:
    weekly = cron("30 2 * * SUN", "next_business_day", "holiday", **NEW_YORK_SKIP)
    other = Calendar(name="holiday", dates=["2026-03-09"])
    fires, omitted = rows(weekly, "2026-03-02T12:00:00", 2, other)
    assert fires == ["Sun 2026-03-15 06:30", "Sun 2026-03-22 06:30"]
    assert omitted == ["2026-03-08 dst_gap None"]


def test_an_hourly_schedule_rolls_only_what_passes_no_fire_of_its_own() -> None:
    # Forward, each of the held Sunday's wall times would land past the next fire (the
    # last, 23:30, on Monday 23:30, past Monday 00:30): all 24 are rolled away, the
    # gap's 02:30 with them, which is told so, not as skipped by the gap.
    hourly = cron("30 * * * *", "next_business_day", "holiday", **NEW_YORK_SKIP)
    fires, omitted = rows(hourly, "2026-03-08T04:00:00", 2, HOLIDAY)  # Saturday 23:00 EST
    assert fires == ["Sun 2026-03-08 04:30", "Mon 2026-03-09 04:30"]  # Sat 23:30, Mon 00:30
    assert omitted == ["2026-03-08 rolled_away holiday"] * 24


def test_a_weekly_calendar_trigger_rolls_its_gap_skipped_fire_too() -> None:
    weekly = CalendarTrigger.model_validate(
        {
            "weeks": 1,
            "hour": 2,
            "minute": 30,
            "start_date": "2026-03-01",
            "calendar": {"name": "holiday", "policy": "previous_business_day"},
            **NEW_YORK_SKIP,
        }
    )
    fires, _ = rows(weekly, "2026-03-02T12:00:00", 2, HOLIDAY)
    assert fires == ["Sat 2026-03-07 07:30 rolled from 2026-03-08", "Sun 2026-03-15 06:30"]
