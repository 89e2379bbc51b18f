"""The overlap rule (domain.overlap): where an occurrence goes when slots are taken."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.backfills import check_overlap
from domain.errors import InvalidRequest
from domain.overlap import (
    CANCELLED_BY_PAUSE,
    CANCELLED_BY_POLICY,
    DELETED,
    MAX_QUEUED,
    Placement,
    QueueDrop,
    Slots,
    claim_reads_queue,
    dropped_queue,
    place,
    plan,
    starts_as_claimed,
)
from domain.runs import RunStatus
from domain.triggers import IntervalTrigger
from tests.fixtures.tasks import make_task

RUN, MISSED = RunStatus.RUNNING, RunStatus.MISSED


@pytest.mark.parametrize("overlap", ["skip", "buffer_one", "buffer_all", "replace"])
def test_a_free_slot_with_nothing_waiting_starts(overlap: str) -> None:
    assert place(overlap, Slots(limit=2, in_flight=1)) is Placement.START


@pytest.mark.parametrize(
    ("overlap", "slots", "placement"),
    [
        ("skip", Slots(1, 1), Placement.SKIP),
        ("buffer_one", Slots(1, 1), Placement.QUEUE),
        ("buffer_one", Slots(1, 1, queued=1), Placement.SKIP),
        ("buffer_all", Slots(1, 1, queued=MAX_QUEUED - 1), Placement.QUEUE),
        ("buffer_all", Slots(1, 1, queued=MAX_QUEUED), Placement.SKIP),
        ("replace", Slots(1, 1, replaceable=1), Placement.REPLACE_RUNNING),
        ("replace", Slots(1, 1, queued=1, replaceable=0), Placement.REPLACE_QUEUED),
        ("replace", Slots(1, 1, replaceable=0), Placement.QUEUE),
    ],
)
def test_taken_slots(overlap: str, slots: Slots, placement: Placement) -> None:
    assert place(overlap, slots) is placement


def test_the_queue_starts_before_new_occurrences() -> None:
    slot_plan = plan("buffer_all", Slots(limit=2, in_flight=0, queued=3), [RUN])
    assert slot_plan.start_queued == 2
    assert slot_plan.placements == (Placement.QUEUE,)


def test_skip_is_the_rule_before_queues() -> None:
    slot_plan = plan("skip", Slots(limit=2, in_flight=1), [MISSED, RUN, RUN])
    assert slot_plan == plan("skip", Slots(2, 1), [MISSED, RUN, RUN])
    assert slot_plan.start_queued == 0
    assert slot_plan.placements == (None, Placement.START, Placement.SKIP)
    assert [p.status for p in slot_plan.placements if p] == [RUN, RunStatus.SKIPPED]


def test_replace_stops_each_run_once_then_replaces_the_waiting() -> None:
    slot_plan = plan("replace", Slots(limit=1, in_flight=1, replaceable=1), [RUN, RUN, RUN])
    assert slot_plan.placements == (
        Placement.REPLACE_RUNNING,
        Placement.REPLACE_QUEUED,
        Placement.REPLACE_QUEUED,
    )


@pytest.mark.parametrize(
    ("enabled", "overlap", "drop"),
    [
        (True, "buffer_all", None),
        (True, "replace", None),
        # Skip: the task's own queued runs go, its backfills' stay.
        (True, "skip", QueueDrop(CANCELLED_BY_POLICY, backfilled=False)),
        # Paused: every queued run goes, backfilled or not.
        (False, "skip", QueueDrop(CANCELLED_BY_PAUSE, backfilled=True)),
        (False, "buffer_all", QueueDrop(CANCELLED_BY_PAUSE, backfilled=True)),
    ],
)
def test_what_a_tasks_update_does_to_its_queue(
    enabled: bool, overlap: str, drop: QueueDrop | None
) -> None:
    task = make_task(IntervalTrigger(every=60), enabled=enabled)
    assert dropped_queue(task.model_copy(update={"overlap": overlap})) == drop
    assert DELETED.backfilled


def test_a_skip_tasks_claim_reads_no_queue() -> None:
    task = make_task(IntervalTrigger(every=60))
    assert not claim_reads_queue(task)
    assert claim_reads_queue(task.model_copy(update={"overlap": "buffer_one"}))


def test_a_backfill_queues_on_a_skip_task_but_not_on_a_paused_one() -> None:
    task = make_task(IntervalTrigger(every=60))
    check_overlap(task, "buffer_all")  # the default task: accepted
    with pytest.raises(InvalidRequest) as raised:
        check_overlap(task.model_copy(update={"enabled": False}), "buffer_all")
    assert raised.value.field == "overlap"
    check_overlap(task.model_copy(update={"enabled": False}), "allow_all")


_statuses = st.lists(st.sampled_from([RUN, MISSED, RunStatus.SKIPPED]), min_size=1, max_size=3)


@given(
    overlap=st.sampled_from(["skip", "buffer_one", "buffer_all", "replace"]),
    limit=st.integers(1, 4),
    in_flight=st.integers(0, 5),
    queued=st.integers(0, 3),
    statuses=_statuses,
)
def test_the_default_claims_shortcut_is_what_plan_decides(
    overlap: str, limit: int, in_flight: int, queued: int, statuses: list[RunStatus]
) -> None:
    """A store that skips planning when `starts_as_claimed` says so (the claim path of a
    default task) records exactly what `plan` would have: nothing queued starts, an
    occurrence to call starts, any other keeps the status the claim rule gave it."""
    slots = Slots(limit, in_flight, queued, replaceable=in_flight)
    if not starts_as_claimed(slots, statuses):
        return
    planned = plan(overlap, slots, statuses)
    assert planned.start_queued == 0
    assert [p.status if p else s for p, s in zip(planned.placements, statuses, strict=True)] == (
        statuses
    )


def test_the_shortcut_is_not_taken_when_a_slot_or_the_queue_matters() -> None:
    assert starts_as_claimed(Slots(1, 0), [RUN])
    assert starts_as_claimed(Slots(1, 1), [MISSED])
    assert not starts_as_claimed(Slots(1, 1), [RUN])  # no slot: skip, queue or replace
    assert not starts_as_claimed(Slots(2, 0, queued=1), [RUN])  # the queue goes first
    assert not starts_as_claimed(Slots(2, 0), [MISSED, RUN])  # catch-up: several placed
