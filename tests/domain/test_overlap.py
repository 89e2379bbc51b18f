"""The overlap rule (domain.overlap): where an occurrence goes when slots are taken."""

from __future__ import annotations

import pytest

from domain.overlap import MAX_QUEUED, Placement, Slots, place, plan
from domain.runs import RunStatus

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
