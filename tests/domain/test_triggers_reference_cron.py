"""Property tests: cron triggers against the naive reference, DST policies and day rules too."""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import islice
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from domain import _cron
from domain.triggers import fire_times
from tests.domain import reference_triggers as reference
from tests.domain.trigger_strategies import (
    DAY_RULES,
    HOURS,
    MONTHS,
    POLICIES,
    SETTINGS,
    SPARSE_MINUTES,
    WEEKDAY_RULES,
    ZONES,
    DstSpelling,
    cron_or_reject,
    five_field_expressions,
    six_field_expressions,
    transitions,
    zone_and_instant,
)


@SETTINGS
@given(expression=five_field_expressions(), place=zone_and_instant())
def test_cron_agrees_with_the_naive_reference(expression: str, place: tuple[str, datetime]) -> None:
    zone, after = place
    trigger = cron_or_reject(expression, zone)
    first = trigger.next_fire_time(after)
    assert first == reference.cron_next(expression, zone, after)
    if first is not None:
        assert trigger.next_fire_time(first) == reference.cron_next(expression, zone, first)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=six_field_expressions(), place=zone_and_instant())
def test_six_field_cron_agrees_with_the_naive_reference(
    expression: str, place: tuple[str, datetime]
) -> None:
    zone, after = place
    trigger = cron_or_reject(expression, zone)
    assert trigger.next_fire_time(after) == reference.cron_next(expression, zone, after)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    expression=five_field_expressions(),
    place=zone_and_instant(),
    start_shift=st.integers(-2 * 86400, 2 * 86400),
    length=st.integers(0, 3 * 86400),
    naive=st.booleans(),
)
def test_cron_bounds_agree_with_the_naive_reference(
    expression: str, place: tuple[str, datetime], start_shift: int, length: int, naive: bool
) -> None:
    zone, after = place
    start = after + timedelta(seconds=start_shift)
    end = start + timedelta(seconds=length)
    if naive:
        start = start.astimezone(ZoneInfo(zone)).replace(tzinfo=None)
        end = end.astimezone(ZoneInfo(zone)).replace(tzinfo=None)
    trigger = cron_or_reject(expression, zone, start_at=start, end_at=end)
    expected = reference.cron_next(expression, zone, after, start, end)
    assert trigger.next_fire_time(after) == expected


@settings(max_examples=300, deadline=None)
@given(
    expression=st.one_of(five_field_expressions(), six_field_expressions()),
    start=st.datetimes(datetime(1990, 1, 1), datetime(2060, 1, 1)).map(
        lambda moment: moment.replace(microsecond=0)
    ),
)
def test_fast_stepping_agrees_with_croniter(expression: str, start: datetime) -> None:
    """Within a week, wall times are found without croniter; the answers must match."""
    try:
        schedule = _cron.parse(expression)
    except _cron.CronError:
        assume(False)
        raise
    assume(not schedule.day_rules)  # stepped day by day, never by croniter
    stepper = croniter(schedule.canonical, start - timedelta(seconds=1), ret_type=datetime)
    expected = [stepper.get_next(datetime) for _ in range(6)]
    assert list(islice(schedule.walls_from(start), 6)) == expected


@pytest.mark.parametrize("zone", ZONES)
def test_reference_sees_the_transitions(zone: str) -> None:
    """The drawn instants do cluster on transitions where a zone has them."""
    assert bool(transitions(zone)) == (zone not in {"UTC", "Asia/Kolkata"})


# -- per-trigger DST policies and the day rules --------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=five_field_expressions(), place=zone_and_instant(), dst=POLICIES)
def test_cron_with_a_dst_policy_agrees_with_the_naive_reference(
    expression: str, place: tuple[str, datetime], dst: DstSpelling
) -> None:
    zone, after = place
    trigger = cron_or_reject(expression, zone, dst=dst)
    first = trigger.next_fire_time(after)
    assert first == reference.cron_next(expression, zone, after, **dst)
    if first is not None:
        assert trigger.next_fire_time(first) == reference.cron_next(expression, zone, first, **dst)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    minute=SPARSE_MINUTES,
    hour=HOURS,
    day=DAY_RULES,
    month=MONTHS,
    weekday=st.one_of(st.just("*"), WEEKDAY_RULES),
    place=zone_and_instant(),
)
def test_cron_day_rules_agree_with_the_naive_reference(
    minute: str, hour: str, day: str, month: str, weekday: str, place: tuple[str, datetime]
) -> None:
    zone, after = place
    for expression in (f"{minute} {hour} {day} {month} {weekday}", f"0 9 * {month} {weekday}"):
        trigger = cron_or_reject(expression, zone)
        assert trigger.next_fire_time(after) == reference.cron_next(expression, zone, after)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=five_field_expressions(), place=zone_and_instant(), dst=POLICIES)
def test_annotated_fire_times_are_the_fire_times(
    expression: str, place: tuple[str, datetime], dst: DstSpelling
) -> None:
    """The annotated listing and next_fire_time come from one core: same instants."""
    zone, after = place
    trigger = cron_or_reject(expression, zone, dst=dst)
    annotated = trigger.annotated(after, 5)
    assert [o.at for o in annotated.occurrences] == fire_times(trigger, after, 5)
    last = annotated.occurrences[-1].at if annotated.occurrences else after
    for omission in annotated.omitted:
        assert omission.reason == "dst_gap" and dst["gap"] == "skip"
        assert after < omission.key <= last
