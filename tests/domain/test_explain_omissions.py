"""Explain's `excluded` and `dst_skipped` (docs/api.md, "GET /tasks/{id}/explain"): the
wall time just before the instant that the trigger did not fire, found by the same core
that computes fire times."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from uuid import uuid4

import pytest

from domain.calendars import Calendar
from domain.explain import (
    Explanation,
    Verdict,
    folded_into,
    latest_fire_at_or_before,
    omitted_occurrence,
)
from domain.runs import Run, RunStatus
from domain.triggers import TRIGGER_ADAPTER

HOLIDAYS = Calendar(name="holidays", dates=["2026-12-25"])


def explain_at(
    trigger: Mapping[str, object], at: datetime, calendars: dict[str, Calendar] | None
) -> tuple[datetime | None, Explanation | None]:
    parsed = TRIGGER_ADAPTER.validate_python(trigger)
    fired = latest_fire_at_or_before(parsed, at, calendars)
    return fired, omitted_occurrence(parsed, fired, at, calendars, version=3)


def test_a_date_the_calendar_excludes_is_excluded_naming_the_calendar() -> None:
    trigger = {
        "kind": "cron",
        "expression": "0 9 * * *",
        "timezone": "Europe/Berlin",
        "calendar": {"name": "holidays", "policy": "exclude"},
    }
    at = datetime(2026, 12, 25, 12, 0, tzinfo=UTC)

    fired, answer = explain_at(trigger, at, {"holidays": HOLIDAYS})

    assert fired == datetime(2026, 12, 24, 8, 0, tzinfo=UTC)
    assert answer is not None
    assert (answer.occurrence, answer.verdict, answer.task_version) == (
        datetime(2026, 12, 25, 8, 0, tzinfo=UTC),
        Verdict.EXCLUDED,
        3,
    )
    assert answer.detail == (
        "excluded: 2026-12-25 09:00:00 is a date of calendar holidays, which the trigger excludes"
    )


def test_a_wall_time_a_dst_gap_removed_under_skip_is_dst_skipped() -> None:
    trigger = {
        "kind": "cron",
        "expression": "30 2 * * *",
        "timezone": "America/New_York",
        "dst": {"gap": "skip"},
    }
    at = datetime(2026, 3, 8, 9, 0, tzinfo=UTC)  # 05:00 EDT, the day clocks sprang forward

    fired, answer = explain_at(trigger, at, None)

    assert fired == datetime(2026, 3, 7, 7, 30, tzinfo=UTC)
    assert answer is not None and answer.verdict is Verdict.DST_SKIPPED
    assert answer.detail == (
        "dst_skipped: 2026-03-08 02:30:00 did not exist in America/New_York (a DST gap), "
        "and the gap policy is skip"
    )


def test_a_fired_occurrence_or_a_shifted_gap_has_no_omission() -> None:
    shifted = {"kind": "cron", "expression": "30 2 * * *", "timezone": "America/New_York"}
    at = datetime(2026, 3, 8, 9, 0, tzinfo=UTC)

    fired, answer = explain_at(shifted, at, None)

    assert fired == datetime(2026, 3, 8, 7, 30, tzinfo=UTC)  # 03:30 EDT, shifted
    assert answer is None


def test_a_later_run_stood_only_for_the_occurrences_it_folded() -> None:
    minutely = TRIGGER_ADAPTER.validate_python({"kind": "cron", "expression": "* * * * *"})
    t0 = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)
    minute = timedelta(minutes=1)

    def run_for(at: datetime, coalesced: int) -> Run:
        return Run(
            id=uuid4(),
            task_id=uuid4(),
            scheduled_for=at,
            coalesced=coalesced,
            claimed_at=at,
            status=RunStatus.RUNNING,
            replica="test:1",
        )

    # A run at 12:03 that folded 3 occurrences stood for 12:01, 12:02 and itself.
    assert folded_into(minutely, t0 + minute, run_for(t0 + 3 * minute, 3))
    assert not folded_into(minutely, t0, run_for(t0 + 3 * minute, 3))
    assert not folded_into(minutely, t0 + 2 * minute, run_for(t0 + 3 * minute, 1))


def test_the_excluded_second_just_before_the_instant_is_found_among_tens_of_thousands() -> None:
    # Every second of a held date is excluded: 43,200 of them before noon, more than an
    # annotated listing tells (domain/occurrences.py, MAX_OMISSIONS_TOLD); explain still
    # names the one just before the instant.
    trigger = {
        "kind": "cron",
        "expression": "* * * * * *",
        "timezone": "UTC",
        "calendar": {"name": "holidays", "policy": "exclude"},
    }
    for at, expected in (
        (datetime(2026, 12, 25, 12, 0, tzinfo=UTC), datetime(2026, 12, 25, 12, 0, tzinfo=UTC)),
        (datetime(2026, 12, 26, 6, 0, tzinfo=UTC), None),  # fired at 06:00:00 itself
    ):
        fired, answer = explain_at(trigger, at, {"holidays": HOLIDAYS})
        if expected is None:
            assert (fired, answer) == (at, None)
            continue
        assert fired == datetime(2026, 12, 24, 23, 59, 59, tzinfo=UTC)
        assert answer is not None
        assert (answer.occurrence, answer.verdict) == (expected, Verdict.EXCLUDED)


def test_the_last_excluded_second_of_a_dense_hour_is_found_hours_later() -> None:
    # Every second from 02:00 to 02:59:59 on a held date, nothing after it that day: at
    # 20:00 the wall time just before is 02:59:59, the last of 3,600 excluded ones.
    trigger = {
        "kind": "cron",
        "expression": "* * 2 * * *",
        "timezone": "UTC",
        "calendar": {"name": "holidays", "policy": "exclude"},
    }
    at = datetime(2026, 12, 25, 20, 0, tzinfo=UTC)
    fired, answer = explain_at(trigger, at, {"holidays": HOLIDAYS})
    assert fired == datetime(2026, 12, 24, 2, 59, 59, tzinfo=UTC)
    assert answer is not None
    assert answer.occurrence == datetime(2026, 12, 25, 2, 59, 59, tzinfo=UTC)
    assert answer.detail == (
        "excluded: 2026-12-25 02:59:59 is a date of calendar holidays, which the trigger excludes"
    )


@pytest.mark.parametrize(
    ("at", "last"),
    [
        # Within the held days: the last second before them, 300 days back.
        (datetime(2027, 10, 28, 12, 0, 0, 500_000, tzinfo=UTC), datetime(2027, 1, 1, 22, 59, 59)),
        # After them: the instant itself, and the second before a fraction.
        (datetime(2027, 11, 1, 12, 0, 0, tzinfo=UTC), datetime(2027, 11, 1, 12, 0, 0)),
        (datetime(2027, 11, 1, 12, 0, 0, 999_999, tzinfo=UTC), datetime(2027, 11, 1, 12, 0, 0)),
    ],
)
def test_the_last_fire_time_before_many_held_days_of_a_per_second_trigger(
    at: datetime, last: datetime
) -> None:
    # A fire time every second, then 300 days the calendar holds: the search halves its
    # window toward the last fire time (stepping through them took minutes, the event
    # loop and every other request waiting).
    held = [(date(2027, 1, 2) + timedelta(days=day)).isoformat() for day in range(300)]
    calendars = {"closed": Calendar(name="closed", dates=held)}
    trigger = {
        "kind": "cron",
        "expression": "* * * * * *",
        "timezone": "Europe/Berlin",
        "calendar": {"name": "closed", "policy": "exclude"},
    }

    fired = latest_fire_at_or_before(TRIGGER_ADAPTER.validate_python(trigger), at, calendars)

    assert fired == last.replace(tzinfo=UTC)


def test_a_wall_time_merged_into_another_fire_is_not_told_as_skipped() -> None:
    """Under `previous_business_day`, Saturday's 09:00 rolls onto Friday's own 09:00 and
    fires once, as it (`merged`): explain after it names no omission (it once would
    have read any omission but a roll away as a DST gap)."""
    weekend = Calendar(name="weekend", weekdays=["SAT", "SUN"])
    trigger = {
        "kind": "cron",
        "expression": "0 9 * * *",
        "calendar": {"name": "weekend", "policy": "previous_business_day"},
    }
    at = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)  # a Saturday

    fired, answer = explain_at(trigger, at, {"weekend": weekend})

    assert fired == datetime(2026, 3, 6, 9, 0, tzinfo=UTC)
    assert answer is None
