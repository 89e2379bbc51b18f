"""Property tests: the real triggers against the naive reference, plus invariants.

Instants are drawn around each zone's DST transitions (2005-2035, found here by a plain
scan of zoneinfo) and around month ends, with offsets that favour minute and
quarter-hour boundaries, so the gap and fold rules are exercised rather than avoided.
"""

from __future__ import annotations

import functools
from datetime import date, datetime, timedelta, timezone
from itertools import islice, pairwise
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from domain import _cron
from domain.triggers import (
    CalendarTrigger,
    CronTrigger,
    DstPolicy,
    IntervalTrigger,
    fire_times,
)
from tests.domain import reference_triggers as reference

UTC = timezone.utc
ZONES = [
    "UTC",
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "America/Santiago",
    "America/Havana",
    "Pacific/Apia",
    "Europe/Dublin",  # negative DST in tzdata
    "Antarctica/Troll",  # two-hour shift
    "Pacific/Chatham",  # +12:45 / +13:45
    "Africa/Casablanca",  # Ramadan transitions weeks apart
    "Asia/Kolkata",  # no DST, half-hour offset
]
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@functools.cache
def transitions(zone: str) -> list[datetime]:
    """Every instant 2005-2035 where `zone` changes its UTC offset (to the second)."""
    tz = ZoneInfo(zone)
    found = []
    moment = datetime(2005, 1, 1, tzinfo=UTC)
    while moment.year < 2035:
        later = moment + timedelta(days=1)
        if moment.astimezone(tz).utcoffset() != later.astimezone(tz).utcoffset():
            low, high = moment, later
            while high - low > timedelta(seconds=1):
                middle = low + (high - low) / 2
                middle = middle.replace(microsecond=0)
                if middle.astimezone(tz).utcoffset() == low.astimezone(tz).utcoffset():
                    low = middle
                else:
                    high = middle
            found.append(high)
        moment = later
    return found


@st.composite
def zone_and_instant(draw: st.DrawFn, zones: list[str] = ZONES) -> tuple[str, datetime]:
    zone = draw(st.sampled_from(zones))
    near = transitions(zone)
    month_end = draw(st.dates(date(2005, 1, 1), date(2034, 12, 1))).replace(day=28)
    month_end += timedelta(days=4)
    month_end -= timedelta(days=month_end.day)  # the last day of the drawn month
    base = draw(
        st.one_of(
            st.sampled_from(near) if near else st.nothing(),
            st.just(datetime.combine(month_end, datetime.min.time(), ZoneInfo(zone))),
            st.datetimes(datetime(2005, 1, 1), datetime(2035, 1, 1), timezones=st.just(UTC)),
        )
    )
    shift = draw(
        st.one_of(
            st.integers(-3 * 3600, 3 * 3600),
            st.integers(-48 * 60, 48 * 60).map(lambda minutes: minutes * 60),
            st.integers(-4 * 24, 4 * 24).map(lambda quarters: quarters * 900),
            st.sampled_from([-1, 0, 1]),
        )
    )
    micro = draw(st.sampled_from([0, 0, 0, 1, 999_999]))
    return zone, (base + timedelta(seconds=shift, microseconds=micro)).astimezone(UTC)


def _render(value: int, names: list[str] | None, *, range_end: bool = False) -> str:
    if names is None:
        return str(value)
    index = value - (1 if names is reference.MONTHS else 0)
    if names is reference.WEEKDAYS and value == 7:
        return "sun" if range_end else "7"
    return names[index]


@st.composite
def field(draw: st.DrawFn, low: int, high: int, last: int, names: list[str] | None = None) -> str:
    """One cron field, item by item: values, ranges, steps, lists, names in any case."""

    def value() -> int:
        return draw(st.integers(low, high))

    def item() -> str:
        shape = draw(
            st.sampled_from(["star", "value", "range", "star-step", "range-step", "start-step"])
        )
        use_names = names is not None and draw(st.booleans())
        spelled = names if use_names else None
        if shape == "star":
            return "*"
        if shape == "value":
            return _render(value(), spelled)
        if shape == "star-step":
            return f"*/{draw(st.integers(1, last - low + 1))}"
        if shape == "start-step":
            start = draw(st.integers(low, last))
            return f"{_render(start, spelled)}/{draw(st.integers(1, last - low + 1))}"
        first, second = sorted((value(), value()))
        text = f"{_render(first, spelled)}-{_render(second, spelled, range_end=first > 0)}"
        if spelled is reference.WEEKDAYS and second == 7 and first == 0:
            text = "0-7"
        if shape == "range-step":
            text += f"/{draw(st.integers(1, max(1, second - first + 1)))}"
        return text

    text = ",".join(item() for _ in range(draw(st.integers(1, 3))))
    return text.upper() if draw(st.booleans()) else text


MINUTES = st.one_of(
    st.sampled_from(["0", "*/15", "30", "0,30", "*", "*/7", "59", "45-59/5"]), field(0, 59, 59)
)
HOURS = st.one_of(
    st.sampled_from(["*", "*/1", "0-23", "1", "2", "0", "23", "1-3", "0-11,12-23", "*/2"]),
    field(0, 23, 23),
)
DAY_RULES = st.sampled_from(["L", "L-1", "L-3", "1,15,L", "l-30", "L,L-7", "28-31,L-2"])
DAYS = st.one_of(
    st.sampled_from(["*", "*", "1", "31", "29,30", "*/2", "15-20"]), field(1, 31, 31), DAY_RULES
)
MONTHS = st.one_of(
    st.sampled_from(["*", "*", "*", "2", "3,10,11", "4-9"]), field(1, 12, 12, reference.MONTHS)
)
WEEKDAY_RULES = st.sampled_from(
    ["MON#1", "fri#5", "5L", "FRIL", "0#2", "7#5", "1-5,SUNL", "SAT#1,sat#3", "thu#4", "7L,1#5"]
)
WEEKDAYS = st.one_of(
    st.sampled_from(["*", "*", "*", "0", "7", "1-5", "sat,sun"]),
    field(0, 7, 6, reference.WEEKDAYS),
    WEEKDAY_RULES,
)
POLICIES = st.fixed_dictionaries(
    {
        "gap": st.sampled_from(["shift", "skip", "transition"]),
        "fold": st.sampled_from(["auto", "first", "second", "both"]),
    }
)
SECONDS = st.sampled_from(["0", "30", "0,30", "*/20", "15", "5-7", "59"])
SPARSE_MINUTES = st.sampled_from(["0", "30", "0,30", "*/20", "59", "1-2"])


@st.composite
def five_field_expressions(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 15)) == 0:
        return draw(st.sampled_from(sorted(reference.MACROS)))
    return " ".join(draw(part) for part in (MINUTES, HOURS, DAYS, MONTHS, WEEKDAYS))


@st.composite
def six_field_expressions(draw: st.DrawFn) -> str:
    return " ".join(draw(part) for part in (SECONDS, SPARSE_MINUTES, HOURS, DAYS, MONTHS, WEEKDAYS))


def cron_or_reject(expression: str, zone: str, **bounds: object) -> CronTrigger:
    try:
        return CronTrigger(expression=expression, timezone=zone, **bounds)  # type: ignore[arg-type]
    except ValidationError:
        assume(False)
        raise


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


@st.composite
def calendars(draw: st.DrawFn, zone: str, near: date) -> CalendarTrigger:
    units = draw(
        st.fixed_dictionaries(
            {
                "years": st.sampled_from([0, 0, 0, 1, 2]),
                "months": st.sampled_from([0, 0, 1, 1, 2, 3, 6, 13]),
                "weeks": st.sampled_from([0, 0, 0, 1, 2]),
                "days": st.sampled_from([0, 0, 1, 1, 3, 10, 31]),
            }
        )
    )
    assume(any(units.values()))
    return CalendarTrigger(
        **units,
        hour=draw(st.sampled_from([0, 1, 2, 3, 9, 23, draw(st.integers(0, 23))])),
        minute=draw(st.sampled_from([0, 30, 45, draw(st.integers(0, 59))])),
        second=draw(st.sampled_from([0, 0, 59])),
        timezone=zone,
        start_date=near + timedelta(days=draw(st.integers(-1200, 60))),
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
    expression: str, place: tuple[str, datetime], dst: dict[str, str]
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


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(place=zone_and_instant(), data=st.data(), dst=POLICIES)
def test_calendar_with_a_dst_policy_agrees_with_the_naive_reference(
    place: tuple[str, datetime], data: st.DataObject, dst: dict[str, str]
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


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=five_field_expressions(), place=zone_and_instant(), dst=POLICIES)
def test_annotated_fire_times_are_the_fire_times(
    expression: str, place: tuple[str, datetime], dst: dict[str, str]
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
