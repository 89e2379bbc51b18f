"""Property tests: what every trigger keeps (strictly later, whole UTC seconds, none skipped)."""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from domain.triggers import CalendarTrigger, CronTrigger, IntervalTrigger, fire_times
from tests.domain.trigger_strategies import (
    SETTINGS,
    UTC,
    calendars,
    cron_or_reject,
    five_field_expressions,
    zone_and_instant,
)


def check_invariants(
    trigger: CronTrigger | CalendarTrigger | IntervalTrigger, after: datetime, probe: float
) -> None:
    """Strictly later, whole seconds, UTC, increasing, bounded, and no fire time skipped."""
    times = fire_times(trigger, after, 4)
    start = getattr(trigger, "start_at", None)
    end = getattr(trigger, "end_at", None)
    tz = ZoneInfo(trigger.timezone)

    def read(bound: datetime) -> datetime:  # naive bounds: fold=0, whatever `fold` says
        return bound if bound.tzinfo else bound.replace(tzinfo=tz, fold=0)

    for moment in times:
        assert moment.tzinfo is UTC
        assert moment.microsecond == 0
        if start is not None:
            assert moment >= read(start).replace(microsecond=0)
        if end is not None:
            assert moment <= read(end)
    assert all(moment > after for moment in times)
    assert times == sorted(set(times))
    for earlier, later in pairwise(times):
        between = earlier + (later - earlier) * probe
        assert trigger.next_fire_time(between) == later
        assert trigger.next_fire_time(later - timedelta(seconds=1)) == later


@SETTINGS
@given(expression=five_field_expressions(), place=zone_and_instant(), probe=st.floats(0, 0.999))
def test_cron_invariants(expression: str, place: tuple[str, datetime], probe: float) -> None:
    zone, after = place
    check_invariants(cron_or_reject(expression, zone), after, probe)


@SETTINGS
@given(place=zone_and_instant(), data=st.data(), probe=st.floats(0, 0.999))
def test_calendar_invariants(
    place: tuple[str, datetime], data: st.DataObject, probe: float
) -> None:
    zone, after = place
    check_invariants(data.draw(calendars(zone, after.date())), after, probe)


@SETTINGS
@given(
    place=zone_and_instant(),
    every=st.one_of(st.integers(1, 100_000), st.sampled_from([60, 900, 3600, 86_400])),
    anchor_shift=st.integers(-(10**7), 10**6),
    naive_anchor=st.booleans(),
    probe=st.floats(0, 0.999),
)
def test_interval_is_anchor_plus_k_every(
    place: tuple[str, datetime], every: int, anchor_shift: int, naive_anchor: bool, probe: float
) -> None:
    zone, after = place
    anchor = (after + timedelta(seconds=anchor_shift)).replace(microsecond=0)
    given_anchor = (
        anchor.astimezone(ZoneInfo(zone)).replace(tzinfo=None) if naive_anchor else anchor
    )
    trigger = IntervalTrigger(every=every, timezone=zone, start_at=given_anchor)
    anchor = trigger.effective_anchor()
    fire = trigger.next_fire_time(after)
    assert fire is not None
    assert (fire - anchor) % timedelta(seconds=every) == timedelta(0)
    assert fire >= anchor
    assert fire > after
    assert fire == anchor or fire - timedelta(seconds=every) <= after
    check_invariants(trigger, after, probe)
