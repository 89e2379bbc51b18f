"""Calendared cron triggers against the naive reference (tests/domain/
reference_triggers.py), over zones, DST policies, instants near transitions, holidays
and weekends drawn at random; and the zones whose spring gap ends at midnight, where one
instant belongs to two dates (docs/triggers.md, "Calendars")."""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.calendars import Calendar
from domain.triggers import CronTrigger
from tests.domain import reference_triggers as reference
from tests.domain.trigger_strategies import POLICIES, DstSpelling, zone_and_instant

EXPRESSIONS = st.sampled_from(
    [
        "0 9 * * *",
        "30 2 * * *",
        "30 2 * * SUN",  # weekly, in the spring gap of zones that change on a Sunday
        "0 0 * * *",
        "30 1 * * *",
        "0 9 * * MON-FRI",
        "0 9 1 * *",
        "0 9 L * *",
        "0 9 * * FRI#1",
        "0 */6 * * *",
        "15 0,12 * * SAT",
        "0 9 * * 5L",
    ]
)


# (expression, (zone, after), policy, dst, holiday offsets in days, weekend weekdays)
Case = tuple[str, tuple[str, datetime], str, DstSpelling, set[int], set[int]]


@st.composite
def calendared_cases(
    draw: st.DrawFn, zones: list[str] | None = None, spread: int = 20, most: int = 12
) -> Case:
    """A calendared cron trigger and an instant, with holidays up to `spread` days from
    it (at most `most`) and a weekend of up to two weekdays."""
    dst = draw(POLICIES)
    return (
        draw(EXPRESSIONS),
        draw(zone_and_instant() if zones is None else zone_and_instant(zones=zones)),
        draw(st.sampled_from(["exclude", "next_business_day", "previous_business_day"])),
        DstSpelling(gap=dst["gap"], fold=dst["fold"]),
        draw(st.sets(st.integers(-spread, spread), max_size=most)),
        draw(st.sets(st.integers(0, 6), max_size=2)),
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=calendared_cases())
def test_calendared_cron_agrees_with_the_naive_reference(case: Case) -> None:
    _agrees_with_the_reference(*case)


# Zones whose spring gap ends at midnight (Nuuk every year, Apia skipping 2011-12-30
# whole): a wall time shifted through the gap names the same instant as a wall time of
# the next date, so one instant belongs to two dates.
MIDNIGHT_GAPS = ["America/Nuuk", "Pacific/Apia"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=calendared_cases(zones=MIDNIGHT_GAPS, spread=3, most=4))
def test_an_instant_two_dates_name_fires_when_either_date_is_free(case: Case) -> None:
    _agrees_with_the_reference(*case)


def _agrees_with_the_reference(
    expression: str,
    place: tuple[str, datetime],
    policy: str,
    dst: DstSpelling,
    offsets: set[int],
    weekend: set[int],
) -> None:
    zone, after = place
    local = after.date()
    holidays = {local + timedelta(days=offset) for offset in offsets}
    names = ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"]
    calendar = Calendar(
        name="c",
        dates=[d.isoformat() for d in sorted(holidays)],
        weekdays=[names[i] for i in sorted(weekend)],
    )
    trigger = CronTrigger.model_validate(
        {
            "expression": expression,
            "calendar": {"name": "c", "policy": policy},
            "timezone": zone,
            "dst": dst,
        }
    )
    expected = reference.calendared_cron_next(
        expression, zone, after, holidays, weekend, policy, **dst
    )
    assert trigger.next_fire_time(after, {"c": calendar}) == expected
