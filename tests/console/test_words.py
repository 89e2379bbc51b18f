"""Triggers in words, as the console writes them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from domain.triggers import TRIGGER_ADAPTER
from entrypoints.http.console.words import (
    lateness_words,
    relative_words,
    took_words,
    trigger_words,
)


@pytest.mark.parametrize(
    ("trigger", "words"),
    [
        (
            {"kind": "cron", "expression": "30 2 * * *", "timezone": "America/New_York"},
            "at 02:30 every day, New York time",
        ),
        ({"kind": "cron", "expression": "*/15 * * * *"}, "every 15 minutes, UTC"),
        (
            {"kind": "cron", "expression": "0 0 1 1 *", "timezone": "Asia/Tokyo"},
            "at 00:00 on January 1 every year, Tokyo time",
        ),
        (
            {"kind": "cron", "expression": "30 9 25 DEC *"},
            "at 09:30 on December 25 every year, UTC",
        ),
        ({"kind": "cron", "expression": "0 0 1 */3 *"}, "cron 0 0 1 */3 *, UTC"),
        ({"kind": "cron", "expression": "0 0 1 1 MON"}, "cron 0 0 1 1 MON, UTC"),
        (
            {"kind": "cron", "expression": "* * * * *", "timezone": "Europe/London"},
            "every minute, London time",
        ),
        (
            {"kind": "cron", "expression": "0 9 * * 1-5", "timezone": "Europe/Paris"},
            "at 09:00 on Monday to Friday, Paris time",
        ),
        ({"kind": "cron", "expression": "0 9 * * sat,sun"}, "at 09:00 on Saturday and Sunday, UTC"),
        ({"kind": "cron", "expression": "0 6 1 * *"}, "at 06:00 on day 1 of every month, UTC"),
        ({"kind": "cron", "expression": "15 */2 * * *"}, "every 2 hours, at minute 15, UTC"),
        ({"kind": "cron", "expression": "30 30 2 * * *"}, "at 02:30:30 every day, UTC"),
        ({"kind": "cron", "expression": "0 0 1,15 1 *"}, "cron 0 0 1,15 1 *, UTC"),
        # A step that does not divide its field restarts at 0: the values are named.
        ({"kind": "cron", "expression": "*/45 * * * *"}, "at minutes 0 and 45 past each hour, UTC"),
        (
            {"kind": "cron", "expression": "*/7 * * * *"},
            "at minutes 0, 7, 14, … 56 (every 7 minutes from :00, restarting each hour), UTC",
        ),
        ({"kind": "cron", "expression": "*/20 * * * *"}, "every 20 minutes, UTC"),
        (
            {"kind": "cron", "expression": "0 */5 * * *"},
            "at 00:00, 05:00, 10:00, 15:00 and 20:00 every day, UTC",
        ),
        (
            {"kind": "cron", "expression": "30 */7 * * *"},
            "at 00:30, 07:30, 14:30 and 21:30 every day, UTC",
        ),
        ({"kind": "cron", "expression": "0 */6 * * *"}, "every 6 hours, at minute 0, UTC"),
        ({"kind": "cron", "expression": "*/15 * * * * *"}, "every 15 seconds, UTC"),
        (
            {"kind": "cron", "expression": "*/25 * * * * *"},
            "at seconds 0, 25 and 50 past each minute, UTC",
        ),
        ({"kind": "cron", "expression": "10-50/10 * * * *"}, "cron 10-50/10 * * * *, UTC"),
        ({"kind": "interval", "every": 900}, "every 15 minutes"),
        ({"kind": "interval", "every": 3600}, "every hour"),
        ({"kind": "interval", "every": 90}, "every 90 seconds"),
        (
            {"kind": "calendar", "weeks": 2, "hour": 9, "timezone": "Asia/Tokyo"},
            "at 09:00 every 2 weeks, Tokyo time",
        ),
        (
            {"kind": "calendar", "months": 1, "hour": 9, "start_date": "2026-01-31"},
            "at 09:00 on day 31 of every month (the last day of a shorter month), UTC",
        ),
        (
            {"kind": "calendar", "months": 3, "hour": 9, "start_date": "2026-01-15"},
            "at 09:00 on day 15 of every 3 months, UTC",
        ),
        (
            {"kind": "calendar", "years": 1, "hour": 9, "start_date": "2028-02-29"},
            "at 09:00 on 29 February every year (28 February in other years), UTC",
        ),
        (
            {"kind": "one_shot", "run_at": "2030-01-02T03:04:00", "timezone": "America/New_York"},
            "once, at 2030-01-02 03:04, New York time",
        ),
        (
            {"kind": "one_shot", "run_at": "2030-01-02T03:04:05Z", "timezone": "Asia/Tokyo"},
            "once, at 2030-01-02 12:04:05, Tokyo time",
        ),
        # New York's clocks went from 02:00 to 03:00 on 2026-03-08 and from 02:00 back
        # to 01:00 on 2026-11-01: what each DST policy does to a one-shot then.
        (
            {"kind": "one_shot", "run_at": "2026-03-08T02:30:00", "timezone": "America/New_York"},
            "once, at 2026-03-08 02:30, New York time; the clocks skip that time that day,"
            " so it fires at 03:30:00 EDT",
        ),
        (
            {
                "kind": "one_shot",
                "run_at": "2026-03-08T02:30:00",
                "timezone": "America/New_York",
                "dst": {"gap": "skip"},
            },
            "once, at 2026-03-08 02:30, New York time; the clocks skip that time that day,"
            " so it never fires",
        ),
        (
            {
                "kind": "one_shot",
                "run_at": "2026-03-08T02:30:00",
                "timezone": "America/New_York",
                "dst": {"gap": "transition"},
            },
            "once, at 2026-03-08 02:30, New York time; the clocks skip that time that day,"
            " so it fires at 03:00:00 EDT",
        ),
        (
            {"kind": "one_shot", "run_at": "2026-11-01T01:30:00", "timezone": "America/New_York"},
            "once, at 2026-11-01 01:30, New York time; that time comes twice that day,"
            " and it fires at the first (EDT)",
        ),
        (
            {
                "kind": "one_shot",
                "run_at": "2026-11-01T01:30:00",
                "timezone": "America/New_York",
                "dst": {"fold": "second"},
            },
            "once, at 2026-11-01 01:30, New York time; that time comes twice that day,"
            " and it fires at the second (EST)",
        ),
        (
            {
                "kind": "one_shot",
                "run_at": "2026-11-01T01:30:00",
                "timezone": "America/New_York",
                "dst": {"fold": "both"},
            },
            "once, at 2026-11-01 01:30, New York time; that time comes twice that day,"
            " and it fires at both",
        ),
    ],
)
def test_trigger_words(trigger: dict[str, object], words: str) -> None:
    assert trigger_words(TRIGGER_ADAPTER.validate_python(trigger)) == words


def test_relative_words() -> None:
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert relative_words(now + timedelta(minutes=5, seconds=3), now) == "in 5 minutes"
    assert relative_words(now - timedelta(hours=1), now) == "1 hour ago"
    assert relative_words(now, now) == "now"


def test_durations_are_whole_seconds_as_instants_are() -> None:
    assert took_words(0) == "took under 1 s"
    assert took_words(2) == "took 2 s"
    assert lateness_words(0) == "on time"
    assert lateness_words(3) == "3 s late"
    assert lateness_words(-2) == "2 s early"
