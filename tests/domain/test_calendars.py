"""Calendars as values, and triggers that exclude or roll around their dates.

Tables name the cases people ask about (docs/triggers.md, "Calendars");
test_calendars_reference.py compares calendared cron triggers with the naive reference
over random cases.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from domain.calendars import Calendar, CalendarMissing
from domain.triggers import TRIGGER_ADAPTER, CalendarTrigger, CronTrigger, IntervalTrigger

UTC = timezone.utc
WEEKEND = Calendar(name="weekend", weekdays=["SAT", "SUN"])
EVERY_DAY = Calendar(name="always", weekdays=["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"])


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def cron(expression: str, policy: str, calendar: str = "weekend", **more: object) -> CronTrigger:
    data = {"expression": expression, "calendar": {"name": calendar, "policy": policy}, **more}
    return CronTrigger.model_validate(data)


def rows(
    trigger: CronTrigger | CalendarTrigger | IntervalTrigger,
    after: str,
    count: int,
    *calendars: Calendar,
) -> tuple[list[str], list[str]]:
    named = {c.name: c for c in calendars or (WEEKEND,)}
    annotated = trigger.annotated(at(after), count, named)
    fires = [
        f"{o.at:%a %Y-%m-%d %H:%M}" + (f" rolled from {o.rolled_from}" if o.rolled_from else "")
        for o in annotated.occurrences
    ]
    omitted = [f"{o.date} {o.reason} {o.calendar}" for o in annotated.omitted]
    assert [o.at for o in annotated.occurrences] == _chained(trigger, at(after), count, named)
    return fires, omitted


def _chained(
    trigger: CronTrigger | CalendarTrigger | IntervalTrigger,
    after: datetime,
    count: int,
    named: dict[str, Calendar],
) -> list[datetime]:
    out: list[datetime] = []
    current = after
    while len(out) < count and (following := trigger.next_fire_time(current, named)) is not None:
        out.append(following)
        current = following
    return out


def test_a_calendar_holds_its_dates_yearly_days_and_weekdays() -> None:
    calendar = Calendar(
        name="us", dates=["2026-11-26"], yearly=["01-01", "02-29", "12-25"], weekdays=["sun"]
    )
    assert date(2026, 11, 26) in calendar
    assert date(2031, 12, 25) in calendar
    assert date(2028, 2, 29) in calendar
    assert date(2027, 3, 1) not in calendar  # 02-29 is no date in 2027
    assert date(2026, 3, 1) in calendar  # a Sunday
    assert date(2026, 3, 2) not in calendar
    assert calendar.weekdays == ("SUN",)
    assert not calendar.holds_every_day()
    assert EVERY_DAY.holds_every_day()


@pytest.mark.parametrize(
    ("data", "loc", "message"),
    [
        ({"dates": ["2026-02-30"]}, ("dates", 0), "is not a date"),
        ({"dates": ["2026-01-01", "26-1-2"]}, ("dates", 1), "YYYY-MM-DD"),
        ({"dates": [20260101]}, ("dates", 0), "YYYY-MM-DD"),
        ({"yearly": ["02-30"]}, ("yearly", 0), "no day of the year"),
        ({"yearly": ["1-1"]}, ("yearly", 0), "MM-DD"),
        ({"weekdays": ["SATURDAY"]}, ("weekdays", 0), "MON, TUE"),
        ({"dates": ["2026-01-01"] * 10_001}, ("dates",), "at most 10,000 dates"),
        ({"name": "no spaces"}, ("name",), "pattern"),
        ({"holidays": []}, ("holidays",), "Extra inputs"),
    ],
)
def test_a_malformed_calendar_is_an_error_naming_the_field(
    data: dict[str, object], loc: tuple[object, ...], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        Calendar.model_validate({"name": "x", **data})
    error = caught.value.errors()[0]
    assert error["loc"] == loc
    assert message in error["msg"]


def test_ten_thousand_dates_are_allowed() -> None:
    first = date(2000, 1, 1)
    days = [(first + timedelta(days=i)).isoformat() for i in range(10_000)]
    assert date(2027, 5, 18) in Calendar(name="many", dates=days)


def test_weekend_calendar_rolls_saturday_both_ways() -> None:
    # 2026-03-07 is a Saturday.
    forward = cron("0 9 * * SAT", "next_business_day")
    assert rows(forward, "2026-03-03T00:00:00", 2) == (
        [
            "Mon 2026-03-09 09:00 rolled from 2026-03-07",
            "Mon 2026-03-16 09:00 rolled from 2026-03-14",
        ],
        [],
    )
    back = cron("0 9 * * SAT", "previous_business_day")
    assert rows(back, "2026-03-01T00:00:00", 2) == (
        [
            "Fri 2026-03-06 09:00 rolled from 2026-03-07",
            "Fri 2026-03-13 09:00 rolled from 2026-03-14",
        ],
        [],
    )


def test_payroll_on_the_first_rolls_to_the_previous_business_day() -> None:
    # 2026-03-01 and 2026-11-01 are Sundays; 2026-08-01 is a Saturday.
    payroll = cron("0 9 1 * *", "previous_business_day")
    fires, _ = rows(payroll, "2026-02-15T00:00:00", 3)
    assert fires == [
        "Fri 2026-02-27 09:00 rolled from 2026-03-01",
        "Wed 2026-04-01 09:00",
        "Fri 2026-05-01 09:00",
    ]


def test_a_roll_never_passes_the_next_unrolled_fire_time() -> None:
    daily = cron("0 9 * * *", "next_business_day")
    fires, omitted = rows(daily, "2026-03-06T10:00:00", 2)
    assert fires == ["Mon 2026-03-09 09:00", "Tue 2026-03-10 09:00"]
    # Saturday would pass Sunday; Sunday rolls onto Monday 09:00, a fire time already,
    # which fires once: the preview says so (`merged`), not nothing.
    assert omitted == ["2026-03-07 rolled_away weekend", "2026-03-08 merged weekend"]
    backward = cron("0 9 * * *", "previous_business_day")
    # Saturday rolls back onto Friday 09:00, a fire time already: it fires once, then.
    # Sunday would roll back past Saturday's unrolled fire time: dropped.
    assert rows(backward, "2026-03-06T10:00:00", 1)[1] == [
        "2026-03-07 merged weekend",
        "2026-03-08 rolled_away weekend",
    ]


def test_the_first_occurrence_of_a_span_rolled_back_past_the_fire_before_it_is_told() -> None:
    # Friday and Saturday are closed. From Saturday 08:00, Saturday's 09:00 would roll
    # back to Thursday, past Friday's unrolled 09:00 (before the span): rolled away,
    # and in the span (its place is Saturday 09:00), so the annotation says so.
    closed = Calendar(name="closed", weekdays=["FRI", "SAT"])
    backward = cron("0 9 * * *", "previous_business_day", "closed")
    fires, omitted = rows(backward, "2026-03-07T08:00:00", 3, closed)
    assert fires == ["Sun 2026-03-08 09:00", "Mon 2026-03-09 09:00", "Tue 2026-03-10 09:00"]
    assert omitted == ["2026-03-07 rolled_away closed"]


def test_a_roll_landing_on_an_existing_fire_time_fires_once() -> None:
    # Saturday rolls to Monday 09:00, which the schedule has already: one fire.
    trigger = cron("0 9 * * MON,SAT", "next_business_day")
    fires, omitted = rows(trigger, "2026-03-06T00:00:00", 3)
    assert fires == ["Mon 2026-03-09 09:00", "Mon 2026-03-16 09:00", "Mon 2026-03-23 09:00"]
    assert omitted == [f"2026-03-{day} merged weekend" for day in ("07", "14", "21")]


def test_exclude_leaves_calendar_dates_out_and_says_so() -> None:
    holidays = Calendar(name="holidays", dates=["2026-12-25"], yearly=["01-01"])
    trigger = cron("0 9 * * MON-FRI", "exclude", "holidays")
    fires, omitted = rows(trigger, "2026-12-24T10:00:00", 3, holidays)
    assert fires == ["Mon 2026-12-28 09:00", "Tue 2026-12-29 09:00", "Wed 2026-12-30 09:00"]
    assert omitted == ["2026-12-25 excluded holidays"]


@pytest.mark.parametrize("policy", ["exclude", "next_business_day", "previous_business_day"])
def test_a_calendar_holding_every_day_leaves_no_fire_times(policy: str) -> None:
    trigger = cron("0 9 * * *", policy, "always")
    assert trigger.next_fire_time(at("2026-01-01T00:00:00"), {"always": EVERY_DAY}) is None
    assert rows(trigger, "2026-01-01T00:00:00", 5, EVERY_DAY) == ([], [])


def test_a_roll_finding_no_free_date_within_366_days_is_dropped() -> None:
    first = date(2026, 1, 1)
    closed = Calendar(
        name="closed", dates=[(first + timedelta(days=i)).isoformat() for i in range(400)]
    )
    yearly = CalendarTrigger(
        years=1,
        hour=9,
        start_date="2026-01-01",
        calendar={"name": "closed", "policy": "next_business_day"},
    )
    fires, omitted = rows(yearly, "2025-12-31T00:00:00", 1, closed)
    assert fires == ["Fri 2027-02-05 09:00 rolled from 2027-01-01"]
    assert omitted == ["2026-01-01 rolled_away closed"]


def test_bounds_apply_after_rolling() -> None:
    # Saturday 2026-03-07 rolls back to Friday 09:00, before start_at: it does not fire.
    trigger = cron("0 9 * * SAT", "previous_business_day", start_at="2026-03-06T10:00:00Z")
    assert trigger.next_fire_time(at("2026-03-01T00:00:00"), {"weekend": WEEKEND}) == at(
        "2026-03-13T09:00:00"
    )
    # Saturday 2026-03-07 rolls to Monday the 9th, after end_at: no more fire times.
    ending = cron("0 9 * * SAT", "next_business_day", end_at="2026-03-08T00:00:00Z")
    assert ending.next_fire_time(at("2026-03-03T00:00:00"), {"weekend": WEEKEND}) is None


def test_interval_takes_exclude_only() -> None:
    trigger = IntervalTrigger(
        every=86_400, start_at=at("2026-03-05T12:00:00"), calendar={"name": "weekend"}
    )
    fires, omitted = rows(trigger, "2026-03-05T00:00:00", 3)
    assert fires == ["Thu 2026-03-05 12:00", "Fri 2026-03-06 12:00", "Mon 2026-03-09 12:00"]
    assert omitted == ["2026-03-07 excluded weekend", "2026-03-08 excluded weekend"]
    with pytest.raises(ValidationError) as caught:
        TRIGGER_ADAPTER.validate_python(
            {
                "kind": "interval",
                "every": 60,
                "calendar": {"name": "w", "policy": "next_business_day"},
            }
        )
    assert caught.value.errors()[0]["loc"] == ("interval", "calendar", "policy")


def test_month_clamped_and_rolled_flags_together() -> None:
    trigger = CalendarTrigger(
        months=1,
        hour=9,
        start_date="2026-01-31",
        calendar={"name": "weekend", "policy": "previous_business_day"},
    )
    annotated = trigger.annotated(at("2026-02-01T00:00:00"), 1, {"weekend": WEEKEND})
    fire = annotated.occurrences[0]  # 2026-02-28 is a Saturday: rolled back to the 27th
    assert (fire.at, fire.flags, fire.rolled_from) == (
        at("2026-02-27T09:00:00"),
        ("month_clamped", "rolled"),
        date(2026, 2, 28),
    )


def test_a_trigger_naming_a_calendar_it_is_not_given_is_a_programming_error() -> None:
    trigger = cron("0 9 * * *", "exclude", "missing")
    with pytest.raises(CalendarMissing, match="'missing'"):
        trigger.next_fire_time(at("2026-01-01T00:00:00"), {"weekend": WEEKEND})
    with pytest.raises(CalendarMissing):
        trigger.next_fire_time(at("2026-01-01T00:00:00"))


@pytest.mark.parametrize(
    ("trigger", "held", "after", "expected"),
    [
        # Saturday 23:30 does not exist in Nuuk on 2026-03-28; read through the gap it
        # is Sunday 00:30, a fire time of its own on a date the calendar leaves free.
        (
            {"kind": "cron", "expression": "30 0,23 * * *", "timezone": "America/Nuuk"},
            "2026-03-28",
            datetime(2026, 3, 28, 12, tzinfo=timezone.utc),
            ["2026-03-29T01:30:00+00:00", "2026-03-30T00:30:00+00:00"],
        ),
        # Apia skipped 2011-12-30: its 09:00 is the 31st's 09:00, which is not held.
        (
            {
                "kind": "calendar",
                "days": 1,
                "hour": 9,
                "start_date": "2011-12-01",
                "timezone": "Pacific/Apia",
            },
            "2011-12-30",
            datetime(2011, 12, 29, 20, tzinfo=timezone.utc),
            ["2011-12-30T19:00:00+00:00", "2011-12-31T19:00:00+00:00"],
        ),
    ],
)
def test_an_excluded_date_does_not_take_the_next_dates_fire_time_with_it(
    trigger: dict[str, object], held: str, after: datetime, expected: list[str]
) -> None:
    excluding = TRIGGER_ADAPTER.validate_python(
        {**trigger, "calendar": {"name": "c", "policy": "exclude"}}
    )
    calendars = {"c": Calendar(name="c", dates=[held])}

    annotated = excluding.annotated(after, 2, calendars)

    assert [o.at.isoformat() for o in annotated.occurrences] == expected
    # Shown as the wall time of the free date, not the held one.
    assert annotated.occurrences[0].wall.date() > date.fromisoformat(held)


class TestAnExcludeSearchEnds:
    """An `exclude` trigger whose fire times all fall on calendar dates has none left
    (docs/triggers.md, "Calendars"): the search ends at `end_at`, or 100 years past the
    calendar's last listed date, instead of stepping week by week to the year 9999."""

    SUNDAYS = Calendar(name="sundays", weekdays=["SUN"])

    @pytest.mark.parametrize(
        "trigger",
        [
            {"kind": "cron", "expression": "0 9 * * SUN"},
            {"kind": "cron", "expression": "*/5 * * * SUN"},
            {"kind": "calendar", "weeks": 1, "start_date": "2026-01-04"},
            {"kind": "interval", "every": "P1W", "start_at": "2026-01-04T00:00:00Z"},
        ],
    )
    def test_every_fire_time_on_an_excluded_weekday_leaves_none(
        self, trigger: dict[str, object]
    ) -> None:
        excluded = TRIGGER_ADAPTER.validate_python(
            {**trigger, "calendar": {"name": "sundays", "policy": "exclude"}}
        )
        named = {"sundays": self.SUNDAYS}
        assert excluded.next_fire_time(at("2026-01-01T00:00:00"), named) is None
        annotated = excluded.annotated(at("2026-01-01T00:00:00"), 10, named)
        assert annotated.occurrences == [] and annotated.omitted == []

    def test_a_free_fire_time_decades_away_is_still_found(self) -> None:
        # Leap days on a Saturday, the only free weekday: 2028 to 2044 are excluded.
        saturdays = Calendar(name="saturdays", weekdays=["MON", "TUE", "WED", "THU", "FRI", "SUN"])
        leap_days = cron("0 12 29 2 *", "exclude", calendar="saturdays")
        found = leap_days.next_fire_time(at("2026-01-01T00:00:00"), {"saturdays": saturdays})
        assert found == at("2048-02-29T12:00:00")

    def test_the_search_ends_at_an_excluded_fire_time_a_century_on(self) -> None:
        # Only Wednesdays free. January 4th every 11 years is first a Wednesday in 2136,
        # the excluded one before it (2125) within the century; every 15 years, in 2311,
        # with 2131 excluded and past it: the search ends there.
        named = {
            "wednesdays": Calendar(
                name="wednesdays", weekdays=["MON", "TUE", "THU", "FRI", "SAT", "SUN"]
            )
        }
        for years, expected in ((11, at("2136-01-04T00:00:00")), (15, None)):
            trigger = CalendarTrigger.model_validate(
                {
                    "years": years,
                    "start_date": "2026-01-04",
                    "calendar": {"name": "wednesdays", "policy": "exclude"},
                }
            )
            assert trigger.next_fire_time(at("2026-01-01T00:00:00"), named) == expected

    def test_the_century_counts_from_the_calendars_last_listed_date(self) -> None:
        # The same 15-year trigger, with a date listed in 2250: the search may go on to
        # 2350, and finds 2311.
        listed = Calendar(
            name="wednesdays",
            dates=["2250-06-01"],
            weekdays=["MON", "TUE", "THU", "FRI", "SAT", "SUN"],
        )
        trigger = CalendarTrigger.model_validate(
            {
                "years": 15,
                "start_date": "2026-01-04",
                "calendar": {"name": "wednesdays", "policy": "exclude"},
            }
        )
        found = trigger.next_fire_time(at("2026-01-01T00:00:00"), {"wednesdays": listed})
        assert found == at("2311-01-04T00:00:00")

    def test_an_end_at_ends_the_search_with_the_fire_times_before_it(self) -> None:
        daily = cron("0 9 * * *", "exclude", calendar="sundays", end_at="2026-01-15T00:00:00Z")
        fires, omitted = rows(daily, "2026-01-01T00:00:00", 20, self.SUNDAYS)
        assert len(fires) == 12 and fires[-1] == "Wed 2026-01-14 09:00"
        assert omitted == ["2026-01-04 excluded sundays", "2026-01-11 excluded sundays"]
        sundays = cron("0 9 * * SUN", "exclude", calendar="sundays", end_at="2026-01-15T00:00:00Z")
        assert rows(sundays, "2026-01-01T00:00:00", 5, self.SUNDAYS) == ([], [])


@pytest.mark.parametrize("policy", ["next_business_day", "previous_business_day"])
@pytest.mark.parametrize("expression", ["*/5 * * * *", "*/2 * * * *", "0 9 * * *"])
def test_a_long_run_of_held_dates_rolls_as_the_annotated_fire_times_say(
    policy: str, expression: str
) -> None:
    # Twelve dates held in a row, over New York's change to summer time:
    # `next_fire_time` skips the dates that cannot fire at once, the annotated path
    # (which tells each fire rolled away) steps through every one; both must name the
    # same fire times.
    held = [(date(2026, 3, 2) + timedelta(days=k)).isoformat() for k in range(12)]
    closed = Calendar(name="closed", dates=held, weekdays=["SUN"])
    for zone in ("UTC", "America/New_York"):
        trigger = cron(expression, policy, calendar="closed", timezone=zone)
        after = at("2026-03-03T10:00:00")
        for _ in range(4):
            fast = trigger.next_fire_time(after, {"closed": closed})
            annotated = trigger.annotated(after, 1, {"closed": closed}).occurrences
            assert fast == (annotated[0].at if annotated else None), (zone, after)
            assert fast is not None
            after = fast
