"""iCalendar bodies become calendars (adapters/ical.py, docs/adr/0009)."""

from __future__ import annotations

from datetime import date

import pytest

from adapters.ical import calendar_from_ics
from domain.errors import InvalidRequest

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


def test_all_day_events_exdates_and_yearly_events_become_dates() -> None:
    calendar = calendar_from_ics("office", HOLIDAYS)
    assert calendar.name == "office"
    assert calendar.dates == (
        date(2026, 3, 6),
        date(2026, 3, 13),
        date(2026, 12, 24),
        date(2026, 12, 25),
        date(2026, 12, 26),
    )
    assert calendar.yearly == ("01-01",)
    assert date(2026, 3, 5) not in calendar  # a timed event says nothing of the day


def test_a_body_that_does_not_parse_names_its_line() -> None:
    body = HOLIDAYS.replace("UID:new-year", "this is no content line")
    with pytest.raises(InvalidRequest) as caught:
        calendar_from_ics("office", body)
    assert caught.value.field == "body"
    assert caught.value.message.startswith("line 12 does not parse as iCalendar")


def test_recurrences_other_than_yearly_are_refused() -> None:
    body = HOLIDAYS.replace("RRULE:FREQ=YEARLY", "RRULE:FREQ=WEEKLY;BYDAY=MO")
    with pytest.raises(InvalidRequest, match="only RRULE:FREQ=YEARLY"):
        calendar_from_ics("office", body)


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
