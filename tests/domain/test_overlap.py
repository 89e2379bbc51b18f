"""The overlap rule (domain.overlap): where an occurrence goes when slots are taken."""

from __future__ import annotations

import pytest

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
