"""iCalendar bodies become calendars (adapters/ical.py, docs/adr/0009)."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from adapters.ical import calendar_from_ics as read_ics
from domain.calendars import Calendar
from domain.errors import InvalidRequest

TODAY = date(2026, 11, 20)  # the day of the import: rules without an end run to 2046


def calendar_from_ics(name: str, text: str, today: date = TODAY) -> Calendar:
    return read_ics(name, text, today=today)


def one_event(*lines: str, summary: str = "Closed") -> str:
    """A calendar of one event, its SUMMARY and `lines`."""
    return "\r\n".join(
        [
            "BEGIN:VCALENDAR",
            "VERSION:2.0",
            "PRODID:-//test//EN",
            "BEGIN:VEVENT",
            "UID:event",
            f"SUMMARY:{summary}",
            *lines,
            "END:VEVENT",
            "END:VCALENDAR",
            "",
        ]
    )


def dates_of(*lines: str, today: date = TODAY) -> list[str]:
    calendar = calendar_from_ics("office", one_event(*lines), today)
    assert calendar.yearly == ()
    return [day.isoformat() for day in calendar.dates]


HOLIDAYS = "\r\n".join(
    [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        "PRODID:-//test//EN",
        "BEGIN:VEVENT",
        "UID:closed",
        "SUMMARY:Office closed, a long summary that is folded over",
        "  two lines",
        "DTSTART;VALUE=DATE:20261224",
        "DTEND;VALUE=DATE:20261227",
        "END:VEVENT",
        "BEGIN:VEVENT",
        "UID:new-year",
        "DTSTART;VALUE=DATE:20260101",
        "RRULE:FREQ=YEARLY",
        "END:VEVENT",
        "BEGIN:VEVENT",
        "UID:standup",
        "DTSTART:20260305T090000Z",
        "DTEND:20260305T091500Z",
        "EXDATE;VALUE=DATE:20260306,20260313",
        "END:VEVENT",
        "END:VCALENDAR",
        "",
    ]
)


def test_all_day_events_and_yearly_events_become_dates() -> None:
    calendar = calendar_from_ics("office", HOLIDAYS)
    assert calendar.name == "office"
    assert calendar.dates == (date(2026, 12, 24), date(2026, 12, 25), date(2026, 12, 26))
    assert calendar.yearly == ("01-01",)
    # A timed event says nothing of the day, and its EXDATEs take instances out of its
    # recurrence: they were held dates once.
    assert date(2026, 3, 5) not in calendar
    assert date(2026, 3, 6) not in calendar and date(2026, 3, 13) not in calendar


def test_a_body_that_does_not_parse_names_its_line() -> None:
    body = HOLIDAYS.replace("UID:new-year", "this is no content line")
    with pytest.raises(InvalidRequest) as caught:
        calendar_from_ics("office", body)
    assert caught.value.field == "body"
    assert caught.value.message.startswith("line 12 does not parse as iCalendar")


def test_an_event_longer_than_a_calendar_can_hold_is_refused_not_cut_short() -> None:
    # 2020-01-01 to 2050-01-01 is 10,958 days: keeping the first 10,000 lost 958 silently.
    body = HOLIDAYS.replace("DTEND;VALUE=DATE:20261227", "DTEND;VALUE=DATE:20500101").replace(
        "DTSTART;VALUE=DATE:20261224", "DTSTART;VALUE=DATE:20200101"
    )
    with pytest.raises(InvalidRequest) as caught:
        calendar_from_ics("office", body)
    assert caught.value.field == "body"
    assert "lasts 10,958 days, more than the 10,000 dates a calendar holds" in caught.value.message
    exactly = body.replace("DTEND;VALUE=DATE:20500101", "DTEND;VALUE=DATE:20470519")
    assert len(calendar_from_ics("office", exactly).dates) == 10_000
    # Occurrences that overlap hold each of their days once: 9,999 of two days, 10,000.
    overlapping = exactly.replace("WEEKLY;COUNT=5000", "DAILY;COUNT=9999")
    assert len(calendar_from_ics("office", overlapping).dates) == 10_000


@pytest.mark.parametrize(
    "line",
    [
        "DTSTART;VALUE=DATE:20260230",
        "DTEND;VALUE=DATE:2026-03-01",
        "EXDATE;VALUE=DATE:20260101,20261301",
        "RDATE;VALUE=DATE:2026",
        "RRULE:FREQ=WEEKLY;UNTIL=20261332",
    ],
)
def test_a_bad_date_names_its_line(line: str) -> None:
    good = ["DTSTART;VALUE=DATE:20260105", "DTEND;VALUE=DATE:20260106"]
    lines = [line, *(g for g in good if g.split(";")[0] != line.split(";")[0])]
    with pytest.raises(InvalidRequest) as caught:
        calendar_from_ics("office", one_event(*lines))
    assert caught.value.field == "body"
    # Lines 1 to 6 are BEGIN:VCALENDAR, VERSION, PRODID, BEGIN:VEVENT, UID, SUMMARY.
    assert caught.value.message.startswith("line 7 does not parse as iCalendar: ")


@pytest.mark.parametrize(
    "body",
    [
        "BEGIN:\r\nTZID:\r\nEND:VTIMEZONE",  # the library raised AttributeError on it
        "hello, calendar",
    ],
)
def test_whatever_the_library_raises_on_garbage_is_a_problem_with_the_body(body: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        calendar_from_ics("office", body)
    assert caught.value.field == "body"
    assert "does not parse as iCalendar" in caught.value.message


def test_memorial_day_as_outlook_writes_it_is_the_last_monday_of_may_each_year() -> None:
    days = dates_of("DTSTART;VALUE=DATE:20260525", "RRULE:FREQ=YEARLY;BYMONTH=5;BYDAY=-1MO")
    assert days[:4] == ["2026-05-25", "2027-05-31", "2028-05-29", "2029-05-28"]
    # No end: followed through the end of the year 20 years after the import.
    assert len(days) == 21 and days[-1] == "2046-05-28"
    for day in map(date.fromisoformat, days):
        assert (day.month, day.weekday()) == (5, 0) and day.day > 24
    later = dates_of(
        "DTSTART;VALUE=DATE:20260525",
        "RRULE:FREQ=YEARLY;BYMONTH=5;BYDAY=-1MO",
        today=date(2030, 1, 2),
    )
    assert later[-1] == "2050-05-30"


def test_a_weekly_rule_ends_after_its_count_or_on_its_until() -> None:
    start = "DTSTART;VALUE=DATE:20260105"  # a Monday
    assert dates_of(start, "RRULE:FREQ=WEEKLY;COUNT=3") == [
        "2026-01-05",
        "2026-01-12",
        "2026-01-19",
    ]
    through = ["2026-01-05", "2026-01-12", "2026-01-19", "2026-01-26"]
    assert dates_of(start, "RRULE:FREQ=WEEKLY;UNTIL=20260126") == through
    # A date-time UNTIL (in UTC), as some producers write it for all-day events.
    assert dates_of(start, "RRULE:FREQ=WEEKLY;UNTIL=20260126T235959Z") == through


def test_an_interval_skips_periods() -> None:
    assert dates_of(
        "DTSTART;VALUE=DATE:20260115", "RRULE:FREQ=MONTHLY;INTERVAL=3;BYMONTHDAY=15;COUNT=4"
    ) == ["2026-01-15", "2026-04-15", "2026-07-15", "2026-10-15"]
    assert dates_of(
        "DTSTART;VALUE=DATE:20260105", "RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,FR;UNTIL=20260131"
    ) == ["2026-01-05", "2026-01-09", "2026-01-19", "2026-01-23"]


def test_an_exdate_takes_an_occurrence_out_and_is_never_a_date_itself() -> None:
    days = dates_of(
        "DTSTART;VALUE=DATE:20260105",
        "RRULE:FREQ=WEEKLY;COUNT=4",
        # The second occurrence, and a Sunday the rule never gives.
        "EXDATE;VALUE=DATE:20260112,20260111",
    )
    assert days == ["2026-01-05", "2026-01-19", "2026-01-26"]
    # On an event without a rule it takes out its one occurrence.
    assert dates_of("DTSTART;VALUE=DATE:20260105", "EXDATE;VALUE=DATE:20260105") == []


def test_a_plain_yearly_event_stays_yearly_and_anything_more_is_expanded() -> None:
    calendar = calendar_from_ics(
        "office",
        one_event("DTSTART;VALUE=DATE:20261224", "DTEND;VALUE=DATE:20261227", "RRULE:FREQ=YEARLY"),
    )
    assert (calendar.dates, calendar.yearly) == ((), ("12-24", "12-25", "12-26"))
    assert date(2100, 12, 26) in calendar  # a yearly day holds for ever
    # With an EXDATE, it is a recurrence with an exception: expanded, less that year.
    days = dates_of("DTSTART;VALUE=DATE:20261225", "RRULE:FREQ=YEARLY", "EXDATE:20271225")
    assert days[:2] == ["2026-12-25", "2028-12-25"] and days[-1] == "2046-12-25"
    # Across the end of February a leap year holds other month-days: expanded too.
    days = dates_of("DTSTART;VALUE=DATE:20270228", "DTEND;VALUE=DATE:20270302", "RRULE:FREQ=YEARLY")
    assert days[:4] == ["2027-02-28", "2027-03-01", "2028-02-28", "2028-02-29"]


def test_each_occurrence_covers_its_events_days_and_rdates_add_occurrences() -> None:
    days = dates_of(
        "DTSTART;VALUE=DATE:20260105",
        "DTEND;VALUE=DATE:20260107",
        "RRULE:FREQ=MONTHLY;COUNT=2",
        "RDATE;VALUE=DATE:20261228",
    )
    assert days == [
        "2026-01-05",
        "2026-01-06",
        "2026-02-05",
        "2026-02-06",
        "2026-12-28",
        "2026-12-29",
    ]


def test_a_recurrence_giving_more_dates_than_a_calendar_holds_is_refused_naming_it() -> None:
    # Every day from 2000 through 2046 is 17,167 dates.
    body = one_event("DTSTART;VALUE=DATE:20000101", "RRULE:FREQ=DAILY", summary="Every day")
    with pytest.raises(InvalidRequest) as caught:
        calendar_from_ics("office", body)
    assert caught.value.field == "body"
    assert caught.value.message == (
        "event Every day: repeats on more than the 10,000 dates a calendar holds (a rule"
        " without UNTIL or COUNT is followed through 2046-12-31)"
    )
    # Two days each week: 5,001 occurrences are 10,002 dates.
    body = one_event(
        "DTSTART;VALUE=DATE:20260103", "DTEND;VALUE=DATE:20260105", "RRULE:FREQ=WEEKLY;COUNT=5001"
    )
    with pytest.raises(InvalidRequest, match="event Closed: repeats on more than the 10,000"):
        calendar_from_ics("office", body)
    exactly = body.replace("COUNT=5001", "COUNT=5000")
    assert len(calendar_from_ics("office", exactly).dates) == 10_000
    # Occurrences that overlap hold each of their days once: 9,999 of two days, 10,000.
    overlapping = exactly.replace("WEEKLY;COUNT=5000", "DAILY;COUNT=9999")
    assert len(calendar_from_ics("office", overlapping).dates) == 10_000


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("FREQ=HOURLY", "repeats DAILY, WEEKLY, MONTHLY or YEARLY, not HOURLY"),
        ("FREQ=DAILY;BYHOUR=9", "RRULE part BYHOUR is not understood for an all-day event"),
        ("FREQ=DAILY;INTERVAL=0", "INTERVAL is 1 or more, not 0"),
        ("FREQ=DAILY;COUNT=2;UNTIL=20270101", "has an UNTIL or a COUNT, not both"),
        ("FREQ=DAILY;BYYEARDAY=366", "BYYEARDAY is for YEARLY rules (RFC 5545)"),
        ("FREQ=MONTHLY;BYWEEKNO=53", "BYWEEKNO is for YEARLY rules"),
        ("FREQ=WEEKLY;BYMONTHDAY=30", "BYMONTHDAY is for DAILY or MONTHLY or YEARLY rules"),
    ],
)
def test_a_rule_an_all_day_event_cannot_follow_is_refused_naming_the_event(
    rule: str, message: str
) -> None:
    body = one_event("DTSTART;VALUE=DATE:20260101", f"RRULE:{rule}", summary="Odd")
    with pytest.raises(InvalidRequest) as caught:
        calendar_from_ics("office", body)
    assert caught.value.field == "body"
    assert caught.value.message.startswith("event Odd: ")
    assert message in caught.value.message


def test_a_rule_no_date_satisfies_gives_only_its_start() -> None:
    # dateutil looks for its next date to the year 9999 (adapters/ical_recurrence.py).
    assert dates_of("DTSTART;VALUE=DATE:20260101", "RRULE:FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30") == [
        "2026-01-01"
    ]
    for rule in (
        "FREQ=DAILY;INTERVAL=2;BYMONTH=4;BYMONTHDAY=31;COUNT=3",
        "FREQ=DAILY;BYDAY=MO;BYSETPOS=2",  # a day is a set of one date
    ):
        assert dates_of("DTSTART;VALUE=DATE:20260101", f"RRULE:{rule}") == ["2026-01-01"]


def test_an_unbounded_rule_starting_after_the_horizon_gives_its_start() -> None:
    assert dates_of("DTSTART;VALUE=DATE:20600101", "RRULE:FREQ=WEEKLY") == ["2060-01-01"]
    assert dates_of("DTSTART;VALUE=DATE:20600101", "RRULE:FREQ=WEEKLY;COUNT=2") == [
        "2060-01-01",
        (date(2060, 1, 1) + timedelta(days=7)).isoformat(),
    ]


def test_an_instance_moved_by_a_recurrence_id_is_held_where_it_moved() -> None:
    master = ["UID:team-day", "DTSTART;VALUE=DATE:20260105", "RRULE:FREQ=WEEKLY;COUNT=3"]
    moved = ["UID:team-day", "RECURRENCE-ID;VALUE=DATE:20260112", "DTSTART;VALUE=DATE:20260114"]
    lines = [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        "PRODID:-//test//EN",
        # The moved instance may come first.
        *["BEGIN:VEVENT", *moved, "END:VEVENT", "BEGIN:VEVENT", *master, "END:VEVENT"],
        "END:VCALENDAR",
        "",
    ]
    calendar = calendar_from_ics("office", "\r\n".join(lines))
    assert [day.isoformat() for day in calendar.dates] == ["2026-01-05", "2026-01-14", "2026-01-19"]


def test_the_last_days_there_are_are_held_and_a_count_past_them_is_refused() -> None:
    """9999-12-31 is a date like any other (it has no next day, which an event without
    a DTEND once needed), a COUNT ending on it gives every day it counts, and one that
    would go past it is refused rather than cut short (an audit's imports: a 422, and a
    200 holding one day of two)."""
    assert dates_of("DTSTART;VALUE=DATE:99991231") == ["9999-12-31"]
    counted = ("DTSTART;VALUE=DATE:99991230", "RRULE:FREQ=DAILY;COUNT=2")
    assert dates_of(*counted) == ["9999-12-30", "9999-12-31"]
    with pytest.raises(InvalidRequest) as refused:
        dates_of("DTSTART;VALUE=DATE:99991230", "RRULE:FREQ=DAILY;COUNT=3")
    assert "runs past 9999-12-31" in refused.value.message


def test_an_all_day_event_whose_start_names_a_zone_is_held() -> None:
    """`VALUE=DATE` with a TZID, as some exporters write it: a date all the same (it was
    read as a timed event, and dropped without a word)."""
    assert dates_of("DTSTART;TZID=Europe/Paris;VALUE=DATE:20270320") == ["2027-03-20"]
    # A timed event with a zone stays no date.
    assert dates_of("DTSTART;TZID=Europe/Paris:20270320T100000") == []


def test_an_all_day_event_s_duration_is_its_length() -> None:
    """RFC 5545 gives an event a DTEND or a DURATION: `DURATION:P3D` holds three days
    (an audit's import held only the first)."""
    assert dates_of("DTSTART;VALUE=DATE:20270320", "DURATION:P3D") == [
        "2027-03-20",
        "2027-03-21",
        "2027-03-22",
    ]
    weekly = ("DTSTART;VALUE=DATE:20270301", "DURATION:P2D", "RRULE:FREQ=WEEKLY;COUNT=2")
    assert dates_of(*weekly) == ["2027-03-01", "2027-03-02", "2027-03-08", "2027-03-09"]


def test_an_event_without_a_start_or_ending_before_it_starts_is_refused_naming_it() -> None:
    """RFC 5545 wants a DTSTART: an event without one (a misspelt `DTSTAR`, say) was
    skipped without a word, and one whose DTEND comes before its DTSTART held a day."""
    with pytest.raises(InvalidRequest) as no_start:
        calendar_from_ics("office", one_event("DTSTAR;VALUE=DATE:20270320", summary="Founders Day"))
    assert no_start.value.message == "event Founders Day: has no DTSTART"
    with pytest.raises(InvalidRequest) as backwards:
        dates_of("DTSTART;VALUE=DATE:20270320", "DTEND;VALUE=DATE:20270318")
    assert backwards.value.message == (
        "event Closed: ends (DTEND 2027-03-18) before it starts (DTSTART 2027-03-20)"
    )
    # An all-day DTEND on its own DTSTART, as some exporters write one day: that day.
    assert dates_of("DTSTART;VALUE=DATE:20270320", "DTEND;VALUE=DATE:20270320") == ["2027-03-20"]
