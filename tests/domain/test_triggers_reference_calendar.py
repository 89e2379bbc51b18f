"""Property tests: the real calendar triggers against the naive reference, DST policies too."""

from __future__ import annotations

from datetime import datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.trigger_fields import DstPolicy
from tests.domain import reference_triggers as reference
from tests.domain.trigger_strategies import (
    POLICIES,
    SETTINGS,
    DstSpelling,
    calendars,
    zone_and_instant,
)


@SETTINGS
@given(place=zone_and_instant(), data=st.data())
def test_calendar_agrees_with_the_naive_reference(
    place: tuple[str, datetime], data: st.DataObject
) -> None:
    zone, after = place
    trigger = data.draw(calendars(zone, after.date()))
    assert trigger.start_date is not None
    fields = trigger.model_dump(
        include={"years", "months", "weeks", "days", "hour", "minute", "second"}
    )
    expected = reference.calendar_next(
        start_date=trigger.start_date, zone=zone, after=after, **fields
    )
    assert trigger.next_fire_time(after) == expected
    if expected is not None:
        again = reference.calendar_next(
            start_date=trigger.start_date, zone=zone, after=expected, **fields
        )
        assert trigger.next_fire_time(expected) == again


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(place=zone_and_instant(), data=st.data(), dst=POLICIES)
def test_calendar_with_a_dst_policy_agrees_with_the_naive_reference(
    place: tuple[str, datetime], data: st.DataObject, dst: DstSpelling
) -> None:
    zone, after = place
    plain = data.draw(calendars(zone, after.date()))
    trigger = plain.model_copy(update={"dst": DstPolicy(**dst)})
    assert trigger.start_date is not None
    fields = trigger.model_dump(
        include={"years", "months", "weeks", "days", "hour", "minute", "second"}
    )
    expected = reference.calendar_next(
        start_date=trigger.start_date, zone=zone, after=after, **fields, **dst
    )
    assert trigger.next_fire_time(after) == expected
