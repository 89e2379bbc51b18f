"""Rules common to every kind: aware `after`, UTC whole-second results, plain data."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from domain.triggers import (
    TRIGGER_ADAPTER,
    CalendarTrigger,
    CronTrigger,
    IntervalTrigger,
    OneShotTrigger,
    fire_times,
)

UTC = timezone.utc
AnyTrigger = CronTrigger | IntervalTrigger | CalendarTrigger | OneShotTrigger

ONE_OF_EACH = [
    pytest.param(
        CronTrigger(expression="*/15 9-17 * * MON-FRI", timezone="Europe/London"), id="cron"
    ),
    pytest.param(
        IntervalTrigger(every=900, start_at=datetime(2026, 1, 1, tzinfo=UTC)), id="interval"
    ),
    pytest.param(
        CalendarTrigger(
            months=1, hour=9, start_date=date(2026, 1, 31), timezone="America/New_York"
        ),
        id="calendar",
    ),
    pytest.param(
        OneShotTrigger(run_at=datetime(2026, 3, 8, 2, 30), timezone="America/New_York"),
        id="one-shot",
    ),
]
AFTER = datetime(2026, 3, 2, 10, 7, 12, 345_678, tzinfo=timezone(timedelta(hours=5, minutes=30)))


@pytest.mark.parametrize("trigger", ONE_OF_EACH)
def test_naive_after_is_a_value_error(trigger: AnyTrigger) -> None:
    with pytest.raises(ValueError, match="aware"):
        trigger.next_fire_time(datetime(2026, 1, 1))


@pytest.mark.parametrize("trigger", ONE_OF_EACH)
def test_result_is_utc_whole_seconds_strictly_later(trigger: AnyTrigger) -> None:
    fire = trigger.next_fire_time(AFTER)
    assert fire is not None
    assert fire.tzinfo is UTC
    assert fire.microsecond == 0
    assert fire > AFTER


@pytest.mark.parametrize("trigger", ONE_OF_EACH)
def test_next_fire_time_is_pure(trigger: AnyTrigger) -> None:
    assert trigger.next_fire_time(AFTER) == trigger.next_fire_time(AFTER)
    before = trigger.model_dump()
    fire_times(trigger, AFTER, 5)
    assert trigger.model_dump() == before


@pytest.mark.parametrize("trigger", ONE_OF_EACH)
def test_triggers_are_frozen(trigger: AnyTrigger) -> None:
    with pytest.raises(ValidationError):
        trigger.timezone = "UTC"  # type: ignore[misc]  # frozen: the point of the test


@pytest.mark.parametrize("trigger", ONE_OF_EACH)
def test_json_round_trip_is_exact(trigger: AnyTrigger) -> None:
    text = trigger.model_dump_json()
    again = TRIGGER_ADAPTER.validate_json(text)
    assert again == trigger
    assert again.model_dump_json() == text
    assert type(again) is type(trigger)


@pytest.mark.parametrize(
    "trigger",
    [
        pytest.param(
            CronTrigger(
                expression="@daily",
                timezone="Asia/Kolkata",
                start_at=datetime(2026, 1, 1, 9, 30),
                end_at=datetime(
                    2027, 1, 1, 9, 30, 15, 250_000, tzinfo=timezone(timedelta(hours=-3))
                ),
            ),
            id="cron-naive-and-offset-bounds",
        ),
        pytest.param(
            IntervalTrigger(every="PT1H30M", anchor=datetime(2026, 1, 1, 0, 0, 0, 123_456)),
            id="interval-iso-every-and-naive-anchor",
        ),
        pytest.param(
            CalendarTrigger(years=1, months=2, weeks=3, days=4, hour=5, minute=6, second=7),
            id="calendar-every-unit-no-start-date",
        ),
        pytest.param(
            OneShotTrigger(
                run_at=datetime(2026, 11, 1, 1, 30, fold=1), timezone="America/New_York"
            ),
            id="one-shot-naive",
        ),
    ],
)
def test_json_round_trip_keeps_what_the_user_gave(trigger: AnyTrigger) -> None:
    data = json.loads(trigger.model_dump_json())
    again = TRIGGER_ADAPTER.validate_python(data)
    assert again.model_dump(mode="json") == data
    assert again.next_fire_time(AFTER) == trigger.next_fire_time(AFTER)


def test_round_trip_values() -> None:
    trigger = CronTrigger(expression="0 9 * * *", start_at=datetime(2026, 1, 1, 9, 30))
    assert trigger.model_dump(mode="json") == {
        "kind": "cron",
        "expression": "0 9 * * *",
        "timezone": "UTC",
        "start_at": "2026-01-01T09:30:00",
        "end_at": None,
    }
    assert IntervalTrigger(every="P1D").model_dump(mode="json")["every"] == 86_400


API_EXAMPLES = [
    pytest.param(
        '{"kind": "cron", "expression": "*/15 9-17 * * MON-FRI", "timezone": "Europe/London"}',
        CronTrigger,
        # Monday 2026-03-02 10:07 GMT -> 10:15 GMT; then the same day on.
        [datetime(2026, 3, 2, 10, 15, tzinfo=UTC), datetime(2026, 3, 2, 10, 30, tzinfo=UTC)],
        id="cron",
    ),
    pytest.param(
        '{"kind": "interval", "every": "PT15M", "start_at": "2026-01-01T00:00:00Z"}',
        IntervalTrigger,
        [datetime(2026, 3, 2, 10, 15, tzinfo=UTC), datetime(2026, 3, 2, 10, 30, tzinfo=UTC)],
        id="interval",
    ),
    pytest.param(
        '{"kind": "calendar", "months": 1, "hour": 9, "start_date": "2026-01-31",'
        ' "timezone": "America/New_York"}',
        CalendarTrigger,
        # March 31 09:00 EDT, April 30 09:00 EDT.
        [datetime(2026, 3, 31, 13, tzinfo=UTC), datetime(2026, 4, 30, 13, tzinfo=UTC)],
        id="calendar",
    ),
    pytest.param(
        '{"kind": "one_shot", "run_at": "2026-03-08T02:30:00", "timezone": "America/New_York"}',
        OneShotTrigger,
        [datetime(2026, 3, 8, 7, 30, tzinfo=UTC)],
        id="one-shot",
    ),
]


@pytest.mark.parametrize(("body", "kind", "expected"), API_EXAMPLES)
def test_api_examples_parse_through_the_union(
    body: str, kind: type[AnyTrigger], expected: list[datetime]
) -> None:
    trigger = TRIGGER_ADAPTER.validate_json(body)
    assert type(trigger) is kind
    after = datetime(2026, 3, 2, 10, 7, tzinfo=UTC)
    assert fire_times(trigger, after, 2) == expected


def test_interval_example_every_is_900_seconds() -> None:
    trigger = TRIGGER_ADAPTER.validate_json('{"kind": "interval", "every": "PT15M"}')
    assert isinstance(trigger, IntervalTrigger)
    assert trigger.every == 900


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        pytest.param({"kind": "sometimes"}, (), id="unknown-kind"),
        pytest.param({"expression": "* * * * *"}, (), id="missing-kind"),
        pytest.param(
            {"kind": "cron", "expression": "* * * * *", "every": 5},
            ("cron", "every"),
            id="unknown-field-rejected",
        ),
        pytest.param({"kind": "cron"}, ("cron", "expression"), id="missing-expression"),
    ],
)
def test_union_errors(body: dict[str, object], loc: tuple[str, ...]) -> None:
    with pytest.raises(ValidationError) as caught:
        TRIGGER_ADAPTER.validate_python(body)
    [error] = caught.value.errors()
    assert error["loc"] == loc


def test_fire_times_chains_and_stops_at_none() -> None:
    hourly = CronTrigger(expression="0 * * * *", end_at=datetime(2026, 1, 1, 3, tzinfo=UTC))
    assert fire_times(hourly, datetime(2026, 1, 1, tzinfo=UTC), 10) == [
        datetime(2026, 1, 1, hour, tzinfo=UTC) for hour in (1, 2, 3)
    ]
    assert fire_times(hourly, datetime(2026, 1, 1, tzinfo=UTC), 0) == []


@pytest.mark.parametrize("name", ["UTC", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "Factory"])
def test_iana_zone_names_are_accepted(name: str) -> None:
    assert CronTrigger(expression="* * * * *", timezone=name).timezone == name


@pytest.mark.parametrize(
    "name",
    ["", "utc ", "Europe/Londres", "../etc/passwd", "/etc/localtime", "localtime", "America"],
)
def test_unknown_zone_names_are_rejected(name: str) -> None:
    with pytest.raises(ValidationError) as caught:
        OneShotTrigger(run_at=datetime(2026, 1, 1), timezone=name)
    [error] = caught.value.errors()
    assert error["loc"] == ("timezone",)


def test_a_zone_counting_leap_seconds_is_refused_naming_the_civil_one() -> None:
    with pytest.raises(ValidationError) as caught:
        CronTrigger(expression="* * * * *", timezone="right/Europe/London")
    [error] = caught.value.errors()
    assert error["loc"] == ("timezone",)
    assert "use 'Europe/London'" in error["msg"]


def test_schema_takes_every_as_seconds_or_iso_and_gives_seconds() -> None:
    taken = TRIGGER_ADAPTER.json_schema()["$defs"]["IntervalTrigger"]["properties"]["every"]
    given = TRIGGER_ADAPTER.json_schema(mode="serialization")["$defs"]["IntervalTrigger"]
    assert taken["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert given["properties"]["every"]["type"] == "integer"


@pytest.mark.parametrize(
    ("trigger", "first"),
    [
        # Year 1 at 00:00 UTC is still the year 0 in a zone behind UTC: every wall time
        # there is later, and the first of them fires (it found none before).
        (
            CalendarTrigger.model_validate(
                {"days": 1, "start_date": "0001-01-05", "timezone": "Etc/GMT+5"}
            ),
            datetime(1, 1, 5, 5, tzinfo=UTC),
        ),
        (
            CronTrigger(expression="0 0 1 1 *", timezone="Etc/GMT+12"),
            datetime(1, 1, 1, 12, tzinfo=UTC),
        ),
        (  # local mean time, -4:56:02
            CronTrigger(expression="0 0 1 1 *", timezone="America/New_York"),
            datetime(1, 1, 1, 4, 56, 2, tzinfo=UTC),
        ),
    ],
)
def test_the_first_hours_of_year_1_in_a_zone_behind_utc_have_fire_times(
    trigger: AnyTrigger, first: datetime
) -> None:
    start = datetime(1, 1, 1, tzinfo=UTC)
    assert trigger.next_fire_time(start) == first
    assert trigger.annotated(start, 2).occurrences[0].at == first
