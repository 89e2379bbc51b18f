"""One-shot triggers: run_at when it is strictly after `after`, else None."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from domain.triggers import TRIGGER_ADAPTER, OneShotTrigger, fire_times
from tests.domain.cron_support import utc

UTC = timezone.utc
NY = "America/New_York"


RUN_AT = utc(2026, 5, 1, 12)
ONCE = OneShotTrigger(run_at=RUN_AT)


@pytest.mark.parametrize(
    ("trigger", "after", "expected"),
    [
        pytest.param(ONCE, RUN_AT - timedelta(days=1), RUN_AT, id="before-run-at"),
        pytest.param(ONCE, RUN_AT - timedelta(seconds=1), RUN_AT, id="one-second-before"),
        pytest.param(ONCE, RUN_AT, None, id="at-run-at-is-spent"),
        pytest.param(ONCE, RUN_AT + timedelta(days=1), None, id="after-run-at-is-spent"),
        pytest.param(
            ONCE, RUN_AT - timedelta(microseconds=1), RUN_AT, id="after-sub-second-truncated"
        ),
        pytest.param(
            OneShotTrigger(run_at=datetime(2026, 5, 1, 12, 0, 0, 900_000, tzinfo=UTC)),
            utc(2026, 5, 1, 11, 59, 59),
            utc(2026, 5, 1, 12),
            id="run-at-sub-second-truncated-never-rounded-up",
        ),
        pytest.param(
            OneShotTrigger(run_at=datetime(2026, 5, 1, 12, 0, 0, 900_000, tzinfo=UTC)),
            datetime(2026, 5, 1, 12, 0, 0, 500_000, tzinfo=UTC),
            None,
            id="run-at-and-after-in-the-same-second-is-spent",
        ),
        pytest.param(
            OneShotTrigger(run_at=datetime(2026, 5, 1, 12)),
            utc(2026, 5, 1),
            utc(2026, 5, 1, 12),
            id="naive-run-at-defaults-to-utc",
        ),
        pytest.param(
            OneShotTrigger(run_at=datetime(2026, 5, 1, 12), timezone=NY),
            utc(2026, 5, 1),
            utc(2026, 5, 1, 16),
            id="naive-run-at-read-in-zone",
        ),
        pytest.param(
            OneShotTrigger(run_at=datetime(2026, 3, 8, 2, 30), timezone=NY),
            utc(2026, 3, 1),
            utc(2026, 3, 8, 7, 30),
            id="gap-naive-run-at-moves-forward",
        ),
        pytest.param(
            OneShotTrigger(run_at=datetime(2026, 11, 1, 1, 30), timezone=NY),
            utc(2026, 11, 1),
            utc(2026, 11, 1, 5, 30),
            id="fold-naive-run-at-is-the-first-instant",
        ),
        pytest.param(
            OneShotTrigger(run_at=datetime(2026, 4, 5, 1, 45), timezone="Australia/Lord_Howe"),
            utc(2026, 4, 1),
            utc(2026, 4, 4, 14, 45),
            id="fold-lord-howe-first-instant",
        ),
        pytest.param(
            OneShotTrigger(run_at=datetime(2026, 3, 29, 1, 30), timezone="Europe/London"),
            utc(2026, 3, 1),
            utc(2026, 3, 29, 1, 30),
            id="gap-london-0130-is-0230-bst",
        ),
        pytest.param(
            OneShotTrigger(run_at=datetime(2026, 10, 25, 1, 30), timezone="Europe/London"),
            utc(2026, 10, 1),
            utc(2026, 10, 25, 0, 30),
            id="fold-london-first-instant-bst",
        ),
        pytest.param(
            OneShotTrigger(run_at=datetime(2026, 10, 4, 2, 15), timezone="Australia/Lord_Howe"),
            utc(2026, 10, 1),
            utc(2026, 10, 3, 15, 45),
            id="gap-lord-howe-half-hour",
        ),
        pytest.param(
            OneShotTrigger(run_at=datetime(2026, 9, 6, 0, 30), timezone="America/Santiago"),
            utc(2026, 9, 1),
            utc(2026, 9, 6, 4, 30),
            id="gap-santiago-missing-midnight-hour",
        ),
        pytest.param(
            OneShotTrigger(run_at=datetime(2026, 4, 4, 23, 30), timezone="America/Santiago"),
            utc(2026, 4, 1),
            utc(2026, 4, 5, 2, 30),
            id="fold-santiago-repeated-hour-before-midnight",
        ),
        pytest.param(
            OneShotTrigger(run_at=datetime(2011, 12, 30, 12), timezone="Pacific/Apia"),
            utc(2011, 12, 1),
            utc(2011, 12, 30, 22),
            id="gap-apia-skipped-day",
        ),
        pytest.param(
            OneShotTrigger(
                run_at=datetime(2026, 11, 1, 1, 30, tzinfo=timezone(timedelta(hours=-5))),
                timezone=NY,
            ),
            utc(2026, 11, 1),
            utc(2026, 11, 1, 6, 30),
            id="aware-run-at-keeps-its-own-offset",
        ),
    ],
)
def test_next_fire_time(
    trigger: OneShotTrigger, after: datetime, expected: datetime | None
) -> None:
    assert trigger.next_fire_time(after) == expected


def test_fires_exactly_once() -> None:
    assert fire_times(ONCE, RUN_AT - timedelta(days=1), 5) == [RUN_AT]


def test_naive_run_at_keeps_the_value_the_user_gave() -> None:
    trigger = TRIGGER_ADAPTER.validate_json(
        '{"kind": "one_shot", "run_at": "2026-03-08T02:30:00", "timezone": "America/New_York"}'
    )
    assert isinstance(trigger, OneShotTrigger)
    assert trigger.run_at == datetime(2026, 3, 8, 2, 30)
    assert trigger.model_dump(mode="json")["run_at"] == "2026-03-08T02:30:00"


@pytest.mark.parametrize(
    ("fields", "loc"),
    [
        pytest.param({}, "run_at", id="missing-run-at"),
        pytest.param({"run_at": "soon"}, "run_at", id="not-a-datetime"),
        pytest.param({"run_at": "2026-01-01T00:00:00Z", "timezone": "X/Y"}, "timezone", id="zone"),
        pytest.param(
            {"run_at": "2026-01-01T00:00:00Z", "start_at": "2026-01-01T00:00:00Z"},
            "start_at",
            id="one-shot-has-no-bounds",
        ),
    ],
)
def test_validation_errors_name_the_field(fields: dict[str, object], loc: str) -> None:
    with pytest.raises(ValidationError) as caught:
        TRIGGER_ADAPTER.validate_python({"kind": "one_shot", **fields})
    [error] = caught.value.errors()
    assert error["loc"] == ("one_shot", loc)
