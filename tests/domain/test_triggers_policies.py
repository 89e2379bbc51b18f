"""Per-trigger DST policies and the cron day rules, case by case (docs/triggers.md).

Each row is worked out by hand from the zone's transitions; the flags are those the
annotated listing shows for the same fire times.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from domain.triggers import (
    TRIGGER_ADAPTER,
    CalendarTrigger,
    CronTrigger,
    IntervalTrigger,
    OneShotTrigger,
)

UTC = timezone.utc


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# A fire as `listed` shows it (instant, wall time, flags), and an omission (date, wall
# time, reason).
Fire = tuple[str, str, tuple[str, ...]]
Omitted = tuple[str, str, str]


def listed(
    trigger: CronTrigger | CalendarTrigger | OneShotTrigger, after: str, count: int = 3
) -> tuple[list[Fire], list[Omitted]]:
    annotated = trigger.annotated(at(after), count)
    fires: list[Fire] = [
        (o.at.isoformat()[:19], o.wall.isoformat(), o.flags) for o in annotated.occurrences
    ]
    omitted: list[Omitted] = [
        (o.date.isoformat(), o.wall.isoformat(), o.reason) for o in annotated.omitted
    ]
    return fires, omitted


GAP_ROWS = [
    # New York 2026-03-08: 02:00 EST jumps to 03:00 EDT at 07:00Z.
    pytest.param(
        "America/New_York",
        "30 2 * * *",
        "shift",
        "2026-03-07T12:00:00",
        [("2026-03-08T07:30:00", "2026-03-08T02:30:00", ("gap_shifted",))],
        [],
        id="new-york-shift",
    ),
    pytest.param(
        "America/New_York",
        "30 2 * * *",
        "skip",
        "2026-03-07T12:00:00",
        [("2026-03-09T06:30:00", "2026-03-09T02:30:00", ())],
        [("2026-03-08", "02:30:00", "dst_gap")],
        id="new-york-skip",
    ),
    pytest.param(
        "America/New_York",
        "30 2 * * *",
        "transition",
        "2026-03-07T12:00:00",
        [("2026-03-08T07:00:00", "2026-03-08T02:30:00", ("gap_transition",))],
        [],
        id="new-york-transition",
    ),
    # Several gap times fire once at the transition.
    pytest.param(
        "America/New_York",
        "*/20 2 * * *",
        "transition",
        "2026-03-08T06:59:00",
        [
            ("2026-03-08T07:00:00", "2026-03-08T02:00:00", ("gap_transition",)),
            ("2026-03-09T06:00:00", "2026-03-09T02:00:00", ()),
        ],
        [],
        id="new-york-transition-fires-once",
    ),
    # Lord Howe 2026-10-04: 02:00 +10:30 jumps to 02:30 +11:00 at 15:30Z (a 30-minute gap).
    pytest.param(
        "Australia/Lord_Howe",
        "15 2 * * *",
        "transition",
        "2026-10-03T00:00:00",
        [
            ("2026-10-03T15:30:00", "2026-10-04T02:15:00", ("gap_transition",)),
            ("2026-10-04T15:15:00", "2026-10-05T02:15:00", ()),
        ],
        [],
        id="lord-howe-30-minute-gap-transition",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "15 2 * * *",
        "shift",
        "2026-10-03T00:00:00",
        [("2026-10-03T15:45:00", "2026-10-04T02:15:00", ("gap_shifted",))],
        [],
        id="lord-howe-30-minute-gap-shift",
    ),
    # Santiago 2026-09-06: midnight -04 jumps to 01:00 -03 at 04:00Z; that day has no 00:00.
    pytest.param(
        "America/Santiago",
        "0 0 * * *",
        "skip",
        "2026-09-05T00:00:00",
        [
            ("2026-09-05T04:00:00", "2026-09-05T00:00:00", ()),
            ("2026-09-07T03:00:00", "2026-09-07T00:00:00", ()),
        ],
        [("2026-09-06", "00:00:00", "dst_gap")],
        id="santiago-midnight-skip",
    ),
    pytest.param(
        "America/Santiago",
        "30 0 * * *",
        "transition",
        "2026-09-06T00:00:00",
        [("2026-09-06T04:00:00", "2026-09-06T00:30:00", ("gap_transition",))],
        [],
        id="santiago-midnight-transition",
    ),
    # Apia skipped 2011-12-30 (-10 to +14 at 10:00Z): 09:00 on the missing day.
    pytest.param(
        "Pacific/Apia",
        "0 9 * * *",
        "skip",
        "2011-12-29T20:00:00",
        [("2011-12-30T19:00:00", "2011-12-31T09:00:00", ())],
        [("2011-12-30", "09:00:00", "dst_gap")],
        id="apia-missing-day-skip",
    ),
    pytest.param(
        "Pacific/Apia",
        "0 9 * * *",
        "transition",
        "2011-12-29T20:00:00",
        [
            ("2011-12-30T10:00:00", "2011-12-30T09:00:00", ("gap_transition",)),
            ("2011-12-30T19:00:00", "2011-12-31T09:00:00", ()),
        ],
        [],
        id="apia-missing-day-transition",
    ),
    pytest.param(
        "Pacific/Apia",
        "0 9 * * *",
        "shift",
        "2011-12-29T20:00:00",
        [
            ("2011-12-30T19:00:00", "2011-12-30T09:00:00", ("gap_shifted",)),
            ("2011-12-31T19:00:00", "2012-01-01T09:00:00", ()),
        ],
        [],
        id="apia-missing-day-shift-lands-once",
    ),
]


@pytest.mark.parametrize(("zone", "expression", "gap", "after", "fires", "omitted"), GAP_ROWS)
def test_gap_policy(
    zone: str, expression: str, gap: str, after: str, fires: list[Fire], omitted: list[Omitted]
) -> None:
    trigger = CronTrigger(expression=expression, timezone=zone, dst={"gap": gap})
    got_fires, got_omitted = listed(trigger, after, len(fires))
    assert got_fires == fires
    assert got_omitted == omitted
    assert trigger.next_fire_time(at(after)) == at(fires[0][0])


FOLD_ROWS = [
    # New York 2026-11-01: 02:00 EDT falls back to 01:00 EST at 06:00Z; 01:30 is twice.
    pytest.param("30 1 * * *", "auto", ["05:30 fold_first"], id="daily-auto-first"),
    pytest.param("30 1 * * *", "first", ["05:30 fold_first"], id="daily-first"),
    pytest.param("30 1 * * *", "second", ["06:30 fold_second"], id="daily-second"),
    pytest.param("30 1 * * *", "both", ["05:30 fold_first", "06:30 fold_second"], id="daily-both"),
    pytest.param(
        "*/30 * * * *",
        "auto",
        ["05:30 fold_first", "06:00 fold_second", "06:30 fold_second", "07:00 -"],
        id="half-hourly-auto-both",
    ),
    pytest.param(
        "*/30 * * * *",
        "first",
        ["05:30 fold_first", "07:00 -", "07:30 -", "08:00 -"],
        id="half-hourly-first-drops-the-repeat",
    ),
    pytest.param(
        "*/30 * * * *",
        "second",
        ["06:00 fold_second", "06:30 fold_second", "07:00 -", "07:30 -"],
        id="half-hourly-second",
    ),
]


@pytest.mark.parametrize(("expression", "fold", "expected"), FOLD_ROWS)
def test_fold_policy(expression: str, fold: str, expected: list[str]) -> None:
    trigger = CronTrigger(expression=expression, timezone="America/New_York", dst={"fold": fold})
    annotated = trigger.annotated(at("2026-11-01T05:10:00"), len(expected))
    got = [f"{o.at:%H:%M} {' '.join(o.flags) or '-'}" for o in annotated.occurrences]
    assert got == expected


def test_calendar_and_one_shot_triggers_take_the_policy() -> None:
    calendar = CalendarTrigger(
        days=1,
        hour=2,
        minute=30,
        start_date="2026-03-01",
        timezone="America/New_York",
        dst={"gap": "skip"},
    )
    assert calendar.next_fire_time(at("2026-03-07T12:00:00")) == at("2026-03-09T06:30:00")
    assert calendar.annotated(at("2026-03-07T12:00:00"), 1).omitted[0].reason == "dst_gap"
    one_shot = OneShotTrigger(
        run_at="2026-11-01T01:30:00", timezone="America/New_York", dst={"fold": "second"}
    )
    assert one_shot.next_fire_time(at("2026-01-01T00:00:00")) == at("2026-11-01T06:30:00")
    both = OneShotTrigger.model_validate({**one_shot.model_dump(), "dst": {"fold": "both"}})
    assert [o.at for o in both.annotated(at("2026-01-01T00:00:00"), 5).occurrences] == [
        at("2026-11-01T05:30:00"),
        at("2026-11-01T06:30:00"),
    ]
    skipped = OneShotTrigger(
        run_at="2026-03-08T02:30:00", timezone="America/New_York", dst={"gap": "skip"}
    )
    assert skipped.next_fire_time(at("2026-01-01T00:00:00")) is None


def test_default_policy_is_left_out_of_json_and_round_trips() -> None:
    text = (
        '{"kind":"cron","expression":"30 2 * * *","timezone":"UTC","start_at":null,"end_at":null}'
    )
    trigger = TRIGGER_ADAPTER.validate_json(text)
    assert TRIGGER_ADAPTER.dump_json(trigger).decode() == text
    spelled = CronTrigger(expression="30 2 * * *", dst={"gap": "shift", "fold": "auto"})
    assert spelled.next_fire_time(at("2026-03-07T00:00:00")) == at("2026-03-07T02:30:00")
    policy = CronTrigger(expression="0 0 * * *", dst={"gap": "skip", "fold": "both"})
    assert TRIGGER_ADAPTER.validate_json(TRIGGER_ADAPTER.dump_json(policy)) == policy


@pytest.mark.parametrize(
    ("data", "loc", "message"),
    [
        ({"kind": "interval", "every": 60, "dst": {"gap": "skip"}}, ("interval", "dst"), "no dst"),
        (
            {"kind": "cron", "expression": "0 0 * * *", "dst": {"gap": "later"}},
            ("cron", "dst", "gap"),
            "'shift', 'skip' or 'transition'",
        ),
        (
            {"kind": "cron", "expression": "0 0 * * *", "dst": {"fold": "third"}},
            ("cron", "dst", "fold"),
            "'auto', 'first', 'second' or 'both'",
        ),
        (
            {"kind": "one_shot", "run_at": "2026-01-01T00:00:00", "dst": {"gaps": "skip"}},
            ("one_shot", "dst", "gaps"),
            "Extra inputs",
        ),
    ],
)
def test_bad_dst_is_a_validation_error_naming_the_field(
    data: dict[str, Any], loc: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        TRIGGER_ADAPTER.validate_python(data)
    error = caught.value.errors()[0]
    assert error["loc"] == loc
    assert message in error["msg"]


def test_interval_has_no_dst_field_in_its_schema() -> None:
    assert "dst" not in IntervalTrigger.model_json_schema()["properties"]


DAY_RULE_ROWS = [
    pytest.param(
        "0 9 * * FRI#5",
        "2026-02-01",
        ["2026-05-29", "2026-07-31", "2026-10-30"],
        id="FRI#5-skips-months-with-four-Fridays",
    ),
    pytest.param(
        "0 9 * * MON#1", "2026-01-01", ["2026-01-05", "2026-02-02", "2026-03-02"], id="first-Monday"
    ),
    pytest.param(
        "0 9 * * 1#1",
        "2026-01-01",
        ["2026-01-05", "2026-02-02", "2026-03-02"],
        id="first-Monday-by-number",
    ),
    pytest.param(
        "0 9 * * 7#1,0#3",
        "2026-03-01",
        ["2026-03-01", "2026-03-15", "2026-04-05"],
        id="Sunday-as-7-and-0",
    ),
    pytest.param(
        "0 9 * * 5L", "2026-01-01", ["2026-01-30", "2026-02-27", "2026-03-27"], id="last-Friday"
    ),
    pytest.param(
        "0 9 * * friL",
        "2026-01-01",
        ["2026-01-30", "2026-02-27", "2026-03-27"],
        id="last-Friday-by-name",
    ),
    pytest.param(
        "0 9 L * *",
        "2024-01-31T10",
        ["2024-02-29", "2024-03-31", "2024-04-30"],
        id="L-last-day-leap-February",
    ),
    pytest.param(
        "0 9 L 2 *", "2025-01-01", ["2025-02-28", "2026-02-28", "2027-02-28"], id="L-February"
    ),
    pytest.param("0 9 L-1 * *", "2026-02-01", ["2026-02-27", "2026-03-30", "2026-04-29"], id="L-1"),
    pytest.param(
        "0 9 1,15,L * *", "2026-02-02", ["2026-02-15", "2026-02-28", "2026-03-01"], id="L-in-a-list"
    ),
    pytest.param(
        "0 9 L * MON",
        "2026-03-01",
        ["2026-03-02", "2026-03-09", "2026-03-16"],
        id="either-day-rule",
    ),
    pytest.param(
        "0 9 L-30 * *",
        "2026-01-01",
        ["2026-01-01", "2026-03-01", "2026-05-01"],
        id="L-30-only-in-31-day-months",
    ),
]


@pytest.mark.parametrize(("expression", "after", "dates"), DAY_RULE_ROWS)
def test_day_rules(expression: str, after: str, dates: list[str]) -> None:
    trigger = CronTrigger(expression=expression)
    start = datetime.fromisoformat(after).replace(tzinfo=UTC)
    fires = [o.at for o in trigger.annotated(start, 3).occurrences]
    assert [f.date().isoformat() for f in fires] == dates
    assert all(f.hour == 9 for f in fires)
