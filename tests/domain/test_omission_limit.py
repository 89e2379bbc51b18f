"""The annotated fire times tell at most MAX_OMISSIONS_TOLD omissions (docs/triggers.md,
"Annotated fire times"): past that many, the fire times are still exact and the answer
says that `omitted` was cut short, instead of stepping every second of a held run of
dates (which held a replica's event loop for minutes)."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.calendars import Calendar
from domain.occurrences import MAX_OMISSIONS_TOLD, annotate
from domain.triggers import CronTrigger
from tests.domain.trigger_strategies import POLICIES, DstSpelling, zone_and_instant

WEEKDAYS = ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"]


def held_days(first: date, days: int) -> Calendar:
    return Calendar(name="held", dates=[first + timedelta(days=k) for k in range(days)])


def every_second(policy: str, zone: str = "UTC") -> CronTrigger:
    return CronTrigger.model_validate(
        {
            "expression": "* * * * * *",
            "timezone": zone,
            "calendar": {"name": "held", "policy": policy},
        }
    )


def test_every_second_over_a_held_day_tells_the_first_thousand_and_says_there_were_more() -> None:
    held = held_days(date(2027, 1, 1), 1)
    listed = every_second("next_business_day").annotated(
        datetime.fromisoformat("2027-01-01T00:00:00+00:00"), 3, {"held": held}
    )
    # Every second of 2027-01-01 after midnight rolls past the next second: rolled away.
    assert [o.at.isoformat() for o in listed.occurrences] == [
        "2027-01-02T00:00:00+00:00",
        "2027-01-02T00:00:01+00:00",
        "2027-01-02T00:00:02+00:00",
    ]
    assert len(listed.omitted) == MAX_OMISSIONS_TOLD
    assert listed.omitted_truncated
    assert {o.reason for o in listed.omitted} == {"rolled_away"}
    first, last = listed.omitted[0], listed.omitted[-1]
    assert (first.date.isoformat(), first.wall.isoformat()) == ("2027-01-01", "00:00:01")
    assert (last.date.isoformat(), last.wall.isoformat()) == ("2027-01-01", "00:16:40")


def test_a_year_of_held_dates_is_crossed_and_the_first_free_date_found() -> None:
    held = held_days(date(2027, 1, 1), 400)
    for policy in ("exclude", "next_business_day", "previous_business_day"):
        listed = every_second(policy, "Europe/Paris").annotated(
            datetime.fromisoformat("2027-01-01T00:00:00+01:00"), 1, {"held": held}
        )
        assert [o.at.isoformat() for o in listed.occurrences] == ["2028-02-04T23:00:00+00:00"]
        assert listed.omitted_truncated and len(listed.omitted) == MAX_OMISSIONS_TOLD


def test_fewer_omissions_than_the_limit_are_all_told() -> None:
    held = held_days(date(2027, 1, 1), 1)
    trigger = CronTrigger.model_validate(
        {"expression": "*/5 * * * *", "calendar": {"name": "held", "policy": "exclude"}}
    )
    listed = trigger.annotated(
        datetime.fromisoformat("2027-01-01T00:00:00+00:00"), 1, {"held": held}
    )
    assert len(listed.omitted) == 24 * 12 - 1  # 00:05 to 23:55
    assert not listed.omitted_truncated


EXPRESSIONS = st.sampled_from(
    ["*/5 * * * *", "*/2 * * * *", "0 9 * * *", "30 2 * * *", "*/20 * * * * *", "* 2 * * *"]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    expression=EXPRESSIONS,
    place=zone_and_instant(),
    policy=st.sampled_from(["exclude", "next_business_day", "previous_business_day"]),
    dst=POLICIES,
    offsets=st.sets(st.integers(-3, 15), max_size=12),
    weekend=st.sets(st.integers(0, 6), max_size=2),
    count=st.integers(1, 12),
    limit=st.integers(0, 40),
)
def test_a_cut_answer_has_the_same_fire_times_and_never_hides_that_it_was_cut(
    expression: str,
    place: tuple[str, datetime],
    policy: str,
    dst: DstSpelling,
    offsets: set[int],
    weekend: set[int],
    count: int,
    limit: int,
) -> None:
    zone, after = place
    calendar = Calendar(
        name="c",
        dates=sorted(after.date() + timedelta(days=k) for k in offsets),
        weekdays=[WEEKDAYS[i] for i in sorted(weekend)],
    )
    trigger = CronTrigger.model_validate(
        {
            "expression": expression,
            "timezone": zone,
            "calendar": {"name": "c", "policy": policy},
            "dst": dst,
        }
    )
    whole = annotate(trigger, after, count, {"c": calendar}, limit=10**9)
    cut = annotate(trigger, after, count, {"c": calendar}, limit=limit)
    assert cut.occurrences == whole.occurrences
    # Those told are the first met stepping wall times in order: in a DST gap a skipped
    # wall time's place in time (its instant under `shift`) may come after a later wall
    # time's, so they are not always the first by instant.
    assert len(cut.omitted) <= limit
    assert set(cut.omitted) <= set(whole.omitted)
    assert cut.omitted == sorted(cut.omitted, key=lambda o: (o.key, o.date, o.wall))
    if not cut.omitted_truncated:
        assert cut.omitted == whole.omitted
    if len(whole.omitted) > limit:
        assert cut.omitted_truncated
