"""The overlap rule: what an occurrence does when its task's slots are taken.

One decision, `place`, says whether a claimed occurrence starts, waits as a queued
run, is skipped, or replaces a run of its task (docs/policies.md, "Overlap"). Both
stores read a task's `Slots` under its lease lock, start the queued runs the free
slots allow (`startable`), then place each occurrence the claim made in turn
(`Slots.after`); they only lock, read and write what these functions decided.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from domain.claims import lease_duration
from domain.instants import truncate
from domain.runs import RunStatus
from domain.tasks import Task

# At most this many runs of one task wait with `buffer_all`; later ones are skipped.
MAX_QUEUED = 1_000

# The error a run cancelled without being called records.
CANCELLED_BY_REQUEST = "cancelled through the API"
CANCELLED_FROM_CONSOLE = "cancelled from the console"
CANCELLED_BY_PAUSE = "the task was paused before the run started"
CANCELLED_BY_DELETE = "the task was deleted before the run started"
CANCELLED_BY_POLICY = "the task's overlap became skip before the run started"


def replaced_by(run_id: UUID) -> str:
    """The error of a run an occurrence of `overlap: "replace"` took the place of."""
    return f"replaced by run {run_id}"


class Placement(StrEnum):
    START = "start"  # a slot is free: call the target now
    QUEUE = "queue"  # wait as a queued run until a slot frees
    SKIP = "skip"  # recorded skipped, never called
    REPLACE_RUNNING = "replace_running"  # ask the oldest run in flight to stop; wait
    REPLACE_QUEUED = "replace_queued"  # cancel the oldest queued run; wait in its place

    @property
    def status(self) -> RunStatus:
        """The status the placed occurrence's run is recorded with."""
        if self is Placement.START:
            return RunStatus.RUNNING
        if self is Placement.SKIP:
            return RunStatus.SKIPPED
        return RunStatus.QUEUED


@dataclass(frozen=True, slots=True)
class Slots:
    """What a task's slots hold, read under its lease lock.

    Attributes:
        limit: the task's `max_running_instances`.
        in_flight: its runs holding an unexpired lease, on any replica.
        queued: its queued runs (counted up to MAX_QUEUED).
        replaceable: those in flight that nobody has asked to stop yet.
    """

    limit: int
    in_flight: int
    queued: int = 0
    replaceable: int = 0

    @property
    def free(self) -> int:
        return max(0, self.limit - self.in_flight)

    def started(self, count: int) -> Slots:
        """After `count` queued runs started (each takes a slot, stoppable)."""
        if count == 0:  # the usual case, on the claim path of every task
            return self
        return replace(
            self,
            in_flight=self.in_flight + count,
            queued=self.queued - count,
            replaceable=self.replaceable + count,
        )

    def after(self, placement: Placement) -> Slots:
        """After an occurrence was placed so."""
        if placement is Placement.START:
            return self.started_new()
        if placement is Placement.QUEUE:
            return replace(self, queued=self.queued + 1)
        if placement is Placement.REPLACE_RUNNING:
            return replace(self, queued=self.queued + 1, replaceable=self.replaceable - 1)
        return self  # skipped, or one queued run cancelled and one queued in its place

    def started_new(self) -> Slots:
        # The constructor, not `replace`: this is on the claim path of every call.
        return Slots(self.limit, self.in_flight + 1, self.queued, self.replaceable + 1)


def startable(slots: Slots) -> int:
    """How many queued runs start now: as many as free slots, oldest first."""
    return min(slots.queued, slots.free)


def place(overlap: str, slots: Slots) -> Placement:
    """Where an occurrence that should be called goes, under the task's `overlap`.

    It starts when a slot is free and nothing waits before it; otherwise `skip` skips
    it, `buffer_one` queues it unless one waits already, `buffer_all` queues it unless
    MAX_QUEUED wait, and `replace` stops the oldest run in flight that is not being
    stopped already (or, when every one is, cancels the oldest queued run) and waits
    for the slot that frees.
    """
    if slots.free > 0 and slots.queued == 0:
        return Placement.START
    if overlap == "buffer_one":
        return Placement.QUEUE if slots.queued == 0 else Placement.SKIP
    if overlap == "buffer_all":
        return Placement.QUEUE if slots.queued < MAX_QUEUED else Placement.SKIP
    if overlap == "replace":
        if slots.free > 0:  # a slot frees for the runs waiting before it: wait too
            return Placement.QUEUE
        if slots.replaceable > 0:
            return Placement.REPLACE_RUNNING
        if slots.queued > 0:
            return Placement.REPLACE_QUEUED
        return Placement.QUEUE
    return Placement.SKIP


def start_fields(task: Task, now: datetime, replica: str) -> dict[str, Any]:
    """The fields a queued run takes when it starts at `now` on `replica`: running,
    with a lease as long as a freshly claimed run's."""
    started_at = truncate(now)
    return {
        "status": RunStatus.RUNNING,
        "started_at": started_at,
        "lease_expires_at": started_at + lease_duration(task.target),
        "replica": replica,
    }


def cancelled_fields(now: datetime, error: str) -> dict[str, Any]:
    """The fields a queued run takes when it is cancelled uncalled."""
    return {"status": RunStatus.CANCELLED, "finished_at": truncate(now), "error": error}


@dataclass(frozen=True, slots=True)
class QueueDrop:
    """Which queued runs of a task a write cancels uncalled, with the error they record:
    every one (`backfilled`: those of its backfills too), or only the task's own."""

    error: str
    backfilled: bool


# A deleted task's queue goes whole, backfilled runs and all; so does a paused one's.
DELETED = QueueDrop(CANCELLED_BY_DELETE, backfilled=True)
PAUSED = QueueDrop(CANCELLED_BY_PAUSE, backfilled=True)


def dropped_queue(task: Task) -> QueueDrop | None:
    """What becomes of the queued runs of `task` (as written by an update), None: they
    stay. A paused task keeps none. A task whose own overlap no longer queues (`skip`)
    loses its own queued runs but keeps those of its backfills: a backfill's runs wait
    under the backfill's overlap, whatever the task's (docs/policies.md, "Backfill")."""
    if not task.enabled:
        return PAUSED
    if task.overlap == "skip":
        return QueueDrop(CANCELLED_BY_POLICY, backfilled=False)
    return None


def claim_reads_queue(task: Task) -> bool:
    """Whether a claim of `task` reads its queue. One on `skip` keeps no queue of its
    own: its occurrences start or are skipped by its leases alone (the claim path of a
    default task reads nothing more), and the runs its backfills queued are started by
    the slots that free (`startable`, when a run ends or a lease expires)."""
    return task.overlap != "skip"


@dataclass(frozen=True, slots=True)
class SlotPlan:
    """What one claim of a task does with its slots: how many queued runs start first
    (the oldest), then where each occurrence it made goes (None: not to be called,
    a missed run)."""

    start_queued: int
    placements: tuple[Placement | None, ...]


def plan(overlap: str, slots: Slots, statuses: list[RunStatus]) -> SlotPlan:
    """The slot plan of a claim whose occurrences, oldest first, were decided
    `statuses` (`domain.claims.claim`: RUNNING for those to call): queued runs fill
    the free slots first, so that they start before anything claimed after them, and
    each occurrence to call is then placed by `place` in turn."""
    starting = startable(slots)
    slots = slots.started(starting)
    placements: list[Placement | None] = []
    for status in statuses:
        if status is not RunStatus.RUNNING:
            placements.append(None)
            continue
        placement = place(overlap, slots)
        slots = slots.after(placement)
        placements.append(placement)
    return SlotPlan(starting, tuple(placements))


def starts_as_claimed(slots: Slots, statuses: list[RunStatus]) -> bool:
    """Whether `plan` would leave a claim as the claim rule decided it: one occurrence,
    nothing queued, and a free slot if it is to be called (it starts). The claim path
    of a task on the default policies, where a store may skip planning: `plan` gives the
    same answer, as tests/domain/test_overlap.py checks."""
    if len(statuses) != 1 or slots.queued:
        return False
    return statuses[0] is not RunStatus.RUNNING or slots.in_flight < slots.limit


def queue_count_bound(task: Task) -> int:
    """How far a store counts a task's queued runs: what `plan` can tell apart. Past
    `max_running_instances` only `buffer_all` cares (up to MAX_QUEUED); a longer
    queue is never read further than that."""
    if task.overlap == "buffer_all":
        return MAX_QUEUED
    return task.max_running_instances
