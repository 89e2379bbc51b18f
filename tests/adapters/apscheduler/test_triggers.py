"""`DomainTrigger` yields our triggers' fire times (DST included) and stores only JSON;
`ClockBridge` shifts nothing on the system clock."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from itertools import islice
from uuid import UUID

import pytest

from tests.adapters.apscheduler.support import require_apscheduler

require_apscheduler()

from apscheduler import DeserializationError  # noqa: E402
from apscheduler.serializers.json import JSONSerializer  # noqa: E402

from adapters.apscheduler.triggers import ClockBridge, DomainTrigger  # noqa: E402
from adapters.clock import FakeClock, SystemClock  # noqa: E402
from domain.claims import jitter_offset  # noqa: E402
from domain.triggers import (  # noqa: E402
    CalendarTrigger,
    CronTrigger,
    IntervalTrigger,
    OneShotTrigger,
    Trigger,
    fire_times,
)

TASK = UUID("6f1c0000-0000-4000-8000-000000000001")
NEW_YORK = "America/New_York"

# Around the 2026 transitions in New York: spring forward on 8 March (02:00-03:00 does
# not exist), fall back on 1 November (01:00-02:00 happens twice).
SPRING = datetime(2026, 3, 6, tzinfo=UTC)
FALL = datetime(2026, 10, 30, tzinfo=UTC)

TRIGGERS = [
    pytest.param(CronTrigger(expression="30 2 * * *", timezone=NEW_YORK), SPRING, id="cron-gap"),
    pytest.param(CronTrigger(expression="30 1 * * *", timezone=NEW_YORK), FALL, id="cron-fold"),
    pytest.param(
        CronTrigger(expression="*/20 1 * * *", timezone=NEW_YORK), FALL, id="cron-fold-minutes"
    ),
    pytest.param(
        CalendarTrigger(months=1, hour=9, start_date=date(2026, 1, 31), timezone=NEW_YORK),
        datetime(2026, 1, 1, tzinfo=UTC),
        id="calendar-month-end",
    ),
    pytest.param(
        CalendarTrigger(days=1, hour=2, minute=30, timezone=NEW_YORK), SPRING, id="calendar-gap"
    ),
    pytest.param(
        IntervalTrigger(every=5400, anchor=SPRING, end_at=SPRING + timedelta(hours=9)),
        SPRING,
        id="interval-until-end",
    ),
    pytest.param(
        OneShotTrigger(run_at=datetime(2026, 3, 8, 2, 30), timezone=NEW_YORK),
        SPRING,
        id="one-shot-in-gap",
    ),
]


def _domain_trigger(
    trigger: Trigger, after: datetime, jitter: int = 0, shift: timedelta = timedelta(0)
) -> DomainTrigger:
    return DomainTrigger(TASK, trigger, jitter, trigger.next_fire_time(after), shift)


@pytest.mark.parametrize(("trigger", "after"), TRIGGERS)
def test_fire_times_are_the_domain_triggers(trigger: Trigger, after: datetime) -> None:
    expected = fire_times(trigger, after, 8)
    assert list(islice(_domain_trigger(trigger, after), 8)) == expected


@pytest.mark.parametrize(("trigger", "after"), TRIGGERS)
def test_jitter_is_the_claim_rules(trigger: Trigger, after: datetime) -> None:
    expected = [t + jitter_offset(TASK, t, 600) for t in fire_times(trigger, after, 8)]
    assert list(islice(_domain_trigger(trigger, after, jitter=600), 8)) == expected


def test_an_exhausted_trigger_keeps_answering_none() -> None:
    run_at = datetime(2026, 3, 8, 12, tzinfo=UTC)
    trigger = _domain_trigger(OneShotTrigger(run_at=run_at), SPRING)
    assert [trigger.next(), trigger.next(), trigger.next()] == [run_at, None, None]
    assert DomainTrigger(TASK, OneShotTrigger(run_at=run_at), 0, None).next() is None


def test_a_shift_moves_every_instant() -> None:
    trigger = CronTrigger(expression="30 2 * * *", timezone=NEW_YORK)
    shift = timedelta(days=270, milliseconds=125)
    shifted = list(islice(_domain_trigger(trigger, SPRING, shift=shift), 4))
    assert shifted == [t + shift for t in fire_times(trigger, SPRING, 4)]


def test_the_state_is_json_and_resumes_where_it_left_off() -> None:
    trigger = CronTrigger(expression="30 1 * * *", timezone=NEW_YORK)
    original = _domain_trigger(trigger, FALL, jitter=90, shift=timedelta(seconds=-3))
    consumed = [original.next(), original.next()]
    serializer = JSONSerializer()
    stored = serializer.serialize(original)
    restored = serializer.deserialize(stored)
    assert isinstance(restored, DomainTrigger)
    assert restored.__getstate__() == original.__getstate__()
    assert list(islice(restored, 3)) == list(islice(original, 3))
    assert consumed[0] is not None and b"pickle" not in stored
    assert b'"expression": "30 1 * * *"' in stored


def test_an_unknown_state_version_is_refused() -> None:
    state = _domain_trigger(IntervalTrigger(every=60, anchor=SPRING), SPRING).__getstate__()
    blank = DomainTrigger.__new__(DomainTrigger)
    with pytest.raises(DeserializationError, match="version 2"):
        blank.__setstate__(state | {"version": 2})


def test_the_system_clock_is_not_shifted() -> None:
    bridge = ClockBridge(SystemClock())
    assert {bridge.shift() for _ in range(1000)} == {timedelta(0)}


def test_another_clock_is_shifted_by_whole_milliseconds() -> None:
    wall = datetime(2026, 11, 29, 11, 0, 0, 123456, tzinfo=UTC)
    clock = FakeClock(datetime(2026, 3, 2, 12, tzinfo=UTC))
    shift = ClockBridge(clock, wall=lambda: wall).shift()
    assert shift == wall.replace(microsecond=123000) - clock.now()
    assert ClockBridge(clock, wall=lambda: clock.now() + timedelta(milliseconds=999)).shift() == (
        timedelta(0)
    )
