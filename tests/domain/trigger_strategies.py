"""Hypothesis strategies of the trigger property tests: zones and instants, cron
expressions field by field, calendar triggers, DST policies.

Instants are drawn around each zone's DST transitions (2005-2035, found here by a plain
scan of zoneinfo) and around month ends, with offsets that favour minute and
quarter-hour boundaries, so the gap and fold rules are exercised rather than avoided.
"""

from __future__ import annotations

import functools
from datetime import date, datetime, timedelta, timezone
from typing import TypedDict
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from domain.triggers import CalendarTrigger, CronTrigger
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
    "America/Nuuk",  # its spring gap ends at midnight: one instant, two dates
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


class DstSpelling(TypedDict):
    """A DST policy as POLICIES draws it: the `dst` field's JSON, and the keyword
    arguments of the reference functions."""

    gap: str
    fold: str


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
        return CronTrigger(expression=expression, timezone=zone, **bounds)
    except ValidationError:
        assume(False)
        raise


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
