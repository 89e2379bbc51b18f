"""A DAILY or WEEKLY rule is walked as the YEARLY rule giving the same dates where there is
one (adapters/ical_recurrence.py): whatever the rule, the dates are those dateutil gives
for the rule as written."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from dateutil.rrule import rrulestr  # type: ignore[import-untyped]  # no py.typed
from hypothesis import given, settings
from hypothesis import strategies as st
from icalendar.prop import vRecur

from adapters.ical_recurrence import rule_starts

WEEKDAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]


@st.composite
def rules(draw: st.DrawFn) -> str:
    parts = [f"FREQ={draw(st.sampled_from(['DAILY', 'WEEKLY']))}"]
    if draw(st.booleans()):
        parts.append(f"INTERVAL={draw(st.integers(1, 3))}")
    if draw(st.booleans()):
        months = draw(st.lists(st.integers(1, 12), min_size=1, max_size=3, unique=True))
        parts.append("BYMONTH=" + ",".join(map(str, months)))
    if draw(st.booleans()):
        days = draw(st.lists(st.sampled_from(WEEKDAYS), min_size=1, max_size=3, unique=True))
        parts.append("BYDAY=" + ",".join(days))
    elif parts[0] == "FREQ=DAILY" and draw(st.booleans()):
        # Days every month has (and no weekday besides): the rule gives a date every few
        # years at most, so that its dates are all within the 400 years a rule is followed.
        monthdays = st.integers(1, 28) | st.integers(-28, -1)
        picked = draw(st.lists(monthdays, min_size=1, max_size=3, unique=True))
        parts.append("BYMONTHDAY=" + ",".join(map(str, picked)))
    if draw(st.booleans()):
        parts.append(f"WKST={draw(st.sampled_from(WEEKDAYS))}")
    return ";".join(parts)


@settings(max_examples=300, deadline=None)
@given(
    rule=rules(),
    start=st.dates(date(2000, 1, 1), date(2090, 12, 31)),
    years=st.integers(0, 12),
    counted=st.booleans(),
)
def test_a_rule_gives_the_dates_dateutil_gives_it_as_written(
    rule: str, start: date, years: int, counted: bool
) -> None:
    until = start + timedelta(days=365 * years)
    ending = ";COUNT=10" if counted else f";UNTIL={until:%Y%m%d}"
    text = rule + ending

    found = rule_starts(vRecur.from_ical(text), start, date(9000, 1, 1), 10_000)

    written = rrulestr(text, dtstart=datetime(start.year, start.month, start.day))
    assert found == [moment.date() for moment in written]
