"""Interval triggers: anchor + k * every in elapsed time (docs/triggers.md, "Interval")."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from domain.triggers import TRIGGER_ADAPTER, IntervalTrigger, fire_times
from tests.domain.cron_support import utc

UTC = timezone.utc
NY = "America/New_York"


@pytest.mark.parametrize(
    ("every", "seconds"),
    [
        pytest.param(900, 900, id="int-seconds"),
        pytest.param(900.0, 900, id="whole-float"),
        pytest.param("PT15M", 900, id="iso-minutes"),
        pytest.param("P1D", 86_400, id="iso-day-is-86400-seconds"),
        pytest.param("PT1H30M", 5_400, id="iso-hours-and-minutes"),
        pytest.param("P1W", 604_800, id="iso-week"),
        pytest.param("P1DT2H", 93_600, id="iso-day-and-time"),
        pytest.param("PT90S", 90, id="iso-seconds"),
        pytest.param("PT1.5M", 90, id="iso-fraction-making-whole-seconds"),
        pytest.param("pt15m", 900, id="iso-lower-case"),
        pytest.param("P0Y0M1D", 86_400, id="iso-zero-years-and-months"),
        pytest.param(timedelta(minutes=5), 300, id="timedelta"),
    ],
)
def test_every_is_whole_seconds(every: object, seconds: int) -> None:
    trigger = IntervalTrigger(every=every)
    assert trigger.every == seconds
    assert trigger.model_dump(mode="json")["every"] == seconds


@pytest.mark.parametrize(
    ("every", "message"),
    [
        pytest.param(0, "must be a positive number of seconds, got 0", id="zero"),
        pytest.param(-60, "must be a positive number of seconds, got -60", id="negative"),
        pytest.param(1.5, "must be a whole number of seconds", id="fractional-float"),
        pytest.param(True, "not a boolean", id="boolean"),
        pytest.param("PT0S", "must be a positive number of seconds", id="iso-zero"),
        pytest.param("-PT1H", "must be a positive number of seconds", id="iso-negative"),
        pytest.param("PT0.5S", "not a whole number of seconds", id="iso-sub-second"),
        pytest.param("P1Y", "years or months", id="iso-years-rejected"),
        pytest.param("P1M", "years or months", id="iso-months-rejected"),
        pytest.param("900", "is not an ISO 8601 duration", id="numeric-string"),
        pytest.param("P", "no components", id="iso-empty"),
        pytest.param("PT", "is not an ISO 8601 duration", id="iso-empty-time"),
        pytest.param("P1DT", "is not an ISO 8601 duration", id="iso-dangling-T"),
        pytest.param("P1.5DT1H", "only the last component", id="iso-fraction-not-last"),
        pytest.param("fifteen minutes", "is not an ISO 8601 duration", id="prose"),
        pytest.param(None, "must be a number of seconds or an ISO 8601 duration", id="null"),
        pytest.param([60], "must be a number of seconds or an ISO 8601 duration", id="list"),
        # Longer than 100 years: the claim's instant arithmetic would overflow (a fuzzed
        # task once stopped every claim pass of its engine).
        pytest.param(3_155_760_001, "at most 3155760000 seconds", id="over-100-years"),
        pytest.param(10**20, "at most 3155760000 seconds", id="huge"),
        pytest.param("P100000000D", "at most 3155760000 seconds", id="iso-huge"),
        # A number too large to echo is shown short, not in its 300 digits.
        pytest.param(1e300, "100 years), got a number of about 301 digits", id="echoed-short"),
    ],
)
def test_invalid_every_is_a_validation_error_naming_every(every: object, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        TRIGGER_ADAPTER.validate_python({"kind": "interval", "every": every})
    [error] = caught.value.errors()
    assert error["loc"] == ("interval", "every")
    assert message in error["msg"]
    # The path names the field; its words do not again ("trigger.every every must …").
    assert not error["msg"].startswith("every")


def test_missing_every_is_a_validation_error() -> None:
    with pytest.raises(ValidationError) as caught:
        TRIGGER_ADAPTER.validate_python({"kind": "interval"})
    assert caught.value.errors()[0]["loc"] == ("interval", "every")


START = utc(2026, 1, 1)
QUARTER_HOURLY = IntervalTrigger(every=900, start_at=START)


@pytest.mark.parametrize(
    ("trigger", "after", "expected"),
    [
        pytest.param(QUARTER_HOURLY, START - timedelta(days=3), START, id="before-start-is-start"),
        pytest.param(QUARTER_HOURLY, START - timedelta(seconds=1), START, id="start-inclusive"),
        pytest.param(QUARTER_HOURLY, START, utc(2026, 1, 1, 0, 15), id="strictly-later"),
        pytest.param(QUARTER_HOURLY, utc(2026, 1, 1, 0, 7), utc(2026, 1, 1, 0, 15), id="aligned"),
        pytest.param(
            QUARTER_HOURLY,
            datetime(2026, 1, 1, 0, 14, 59, 999_999, tzinfo=UTC),
            utc(2026, 1, 1, 0, 15),
            id="after-sub-second-truncated",
        ),
        pytest.param(
            QUARTER_HOURLY, utc(2027, 1, 1, 0, 0, 1), utc(2027, 1, 1, 0, 15), id="a-year-later"
        ),
        pytest.param(
            IntervalTrigger(every=3600, start_at=utc(2026, 11, 1, 4)),
            utc(2026, 11, 1, 5, 30),
            utc(2026, 11, 1, 6),
            id="elapsed-time-across-fall-back",
        ),
        pytest.param(
            IntervalTrigger(every=3600, timezone=NY, start_at=datetime(2026, 3, 8, 1, 30)),
            utc(2026, 3, 8, 6, 30),
            utc(2026, 3, 8, 7, 30),
            id="elapsed-time-across-spring-forward-naive-start-in-zone",
        ),
        pytest.param(
            IntervalTrigger(every="P1D", timezone=NY, start_at=datetime(2026, 3, 7, 9)),
            utc(2026, 3, 7, 14),
            utc(2026, 3, 8, 14),
            id="p1d-is-86400-seconds-not-the-same-wall-time",
        ),
        pytest.param(
            IntervalTrigger(every=600, anchor=utc(2026, 1, 1, 0, 3)),
            utc(2026, 1, 1, 1),
            utc(2026, 1, 1, 1, 3),
            id="anchor-when-no-start-at",
        ),
        pytest.param(
            IntervalTrigger(every=600, anchor=utc(2026, 1, 1, 0, 3)),
            utc(2025, 1, 1),
            utc(2026, 1, 1, 0, 3),
            id="anchor-is-the-first-fire-time",
        ),
        pytest.param(
            IntervalTrigger(every=600, start_at=utc(2026, 1, 1, 0, 1), anchor=utc(2026, 1, 1)),
            utc(2026, 1, 1, 1),
            utc(2026, 1, 1, 1, 1),
            id="start-at-wins-over-anchor",
        ),
        pytest.param(
            IntervalTrigger(every=600, timezone=NY, anchor=datetime(2026, 1, 1, 0, 3)),
            utc(2026, 1, 1, 5),
            utc(2026, 1, 1, 5, 3),
            id="naive-anchor-read-in-zone",
        ),
        pytest.param(
            IntervalTrigger(every=3600),
            utc(2026, 1, 1, 0, 30),
            utc(2026, 1, 1, 1),
            id="epoch-aligned-when-no-anchor",
        ),
        pytest.param(
            IntervalTrigger(every=7),
            datetime.fromtimestamp(100, UTC),
            datetime.fromtimestamp(105, UTC),
            id="epoch-aligned-odd-period",
        ),
        pytest.param(
            IntervalTrigger(every=60, start_at=datetime(2026, 1, 1, 0, 0, 0, 700_000, tzinfo=UTC)),
            utc(2025, 12, 31),
            utc(2026, 1, 1),
            id="start-at-sub-second-truncated",
        ),
        pytest.param(
            IntervalTrigger(every=900, start_at=START, end_at=utc(2026, 1, 1, 0, 30)),
            utc(2026, 1, 1, 0, 15),
            utc(2026, 1, 1, 0, 30),
            id="end-at-inclusive",
        ),
        pytest.param(
            IntervalTrigger(every=900, start_at=START, end_at=utc(2026, 1, 1, 0, 29)),
            utc(2026, 1, 1, 0, 15),
            None,
            id="end-at-before-next-is-none",
        ),
        pytest.param(
            IntervalTrigger(every=900, start_at=START, end_at=START),
            START - timedelta(hours=1),
            START,
            id="end-at-equal-start-fires-once",
        ),
    ],
)
def test_next_fire_time(
    trigger: IntervalTrigger, after: datetime, expected: datetime | None
) -> None:
    assert trigger.next_fire_time(after) == expected


def test_hourly_interval_is_3600_real_seconds_apart_across_dst() -> None:
    trigger = IntervalTrigger(every=3600, timezone=NY, start_at=datetime(2026, 11, 1, 0, 30))
    times = fire_times(trigger, utc(2026, 11, 1), 4)
    assert [b - a for a, b in itertools.pairwise(times)] == [timedelta(hours=1)] * 3
    assert times[0] == utc(2026, 11, 1, 4, 30)


@pytest.mark.parametrize(
    ("trigger", "after", "expected"),
    [
        pytest.param(
            IntervalTrigger(every=3600, timezone="Europe/London", start_at=datetime(2026, 3, 29)),
            utc(2026, 3, 28),
            [utc(2026, 3, 29), utc(2026, 3, 29, 1), utc(2026, 3, 29, 2)],
            id="elapsed-london-spring-forward",
        ),
        pytest.param(
            IntervalTrigger(
                every=3600, timezone="Europe/London", start_at=datetime(2026, 10, 25, 0, 30)
            ),
            utc(2026, 10, 24),
            [utc(2026, 10, 24, 23, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 30)],
            id="elapsed-london-fall-back",
        ),
        pytest.param(
            IntervalTrigger(
                every=3600, timezone="Australia/Lord_Howe", start_at=datetime(2026, 10, 4, 1)
            ),
            utc(2026, 10, 3),
            [utc(2026, 10, 3, 14, 30), utc(2026, 10, 3, 15, 30), utc(2026, 10, 3, 16, 30)],
            id="elapsed-lord-howe-half-hour-spring-forward",
        ),
        pytest.param(
            IntervalTrigger(
                every=1800, timezone="Australia/Lord_Howe", start_at=datetime(2026, 4, 5, 1, 30)
            ),
            utc(2026, 4, 4),
            [utc(2026, 4, 4, 14, 30), utc(2026, 4, 4, 15), utc(2026, 4, 4, 15, 30)],
            id="elapsed-lord-howe-half-hour-fall-back-naive-start-first-instant",
        ),
        pytest.param(
            IntervalTrigger(
                every=3600, timezone="America/Santiago", start_at=datetime(2026, 4, 4, 22)
            ),
            utc(2026, 4, 4),
            [utc(2026, 4, 5, 1), utc(2026, 4, 5, 2), utc(2026, 4, 5, 3), utc(2026, 4, 5, 4)],
            id="elapsed-santiago-midnight-fall-back",
        ),
        pytest.param(
            IntervalTrigger(
                every=3600, timezone="America/Santiago", start_at=datetime(2026, 9, 6, 0, 30)
            ),
            utc(2026, 9, 1),
            [utc(2026, 9, 6, 4, 30), utc(2026, 9, 6, 5, 30)],
            id="elapsed-santiago-naive-start-in-gap-read-forward",
        ),
        pytest.param(
            IntervalTrigger(
                every="P1D", timezone="Pacific/Apia", start_at=datetime(2011, 12, 29, 9)
            ),
            utc(2011, 12, 1),
            [utc(2011, 12, 29, 19), utc(2011, 12, 30, 19), utc(2011, 12, 31, 19)],
            id="elapsed-apia-p1d-across-the-lost-day",
        ),
        pytest.param(
            IntervalTrigger(every=3600, timezone=NY, start_at=datetime(2026, 3, 8, 2, 30)),
            utc(2026, 3, 1),
            [utc(2026, 3, 8, 7, 30), utc(2026, 3, 8, 8, 30)],
            id="elapsed-new-york-naive-start-in-gap-read-forward",
        ),
    ],
)
def test_elapsed_time_in_dst_zones(
    trigger: IntervalTrigger, after: datetime, expected: list[datetime]
) -> None:
    assert fire_times(trigger, after, len(expected)) == expected


def test_effective_anchor_falls_back_to_epoch() -> None:
    assert IntervalTrigger(every=60).effective_anchor() == utc(1970, 1, 1)


def test_end_before_start_is_a_validation_error_naming_end_at() -> None:
    with pytest.raises(ValidationError) as caught:
        TRIGGER_ADAPTER.validate_python(
            {
                "kind": "interval",
                "every": 60,
                "timezone": NY,
                "start_at": "2026-01-01T09:00:00",
                "end_at": "2026-01-01T13:59:59Z",
            }
        )
    [error] = caught.value.errors()
    assert error["loc"] == ("interval", "end_at")


def test_unknown_timezone_names_the_field() -> None:
    with pytest.raises(ValidationError) as caught:
        TRIGGER_ADAPTER.validate_python({"kind": "interval", "every": 60, "timezone": "Nowhere"})
    [error] = caught.value.errors()
    assert error["loc"] == ("interval", "timezone")
    assert "unknown time zone 'Nowhere'" in error["msg"]
