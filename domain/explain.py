"""Explain an occurrence: what became of it, from its task's history and its runs.

Pure: the use case (application/explain.py) gathers the versions and runs; these
functions decide the verdict and write the one sentence that says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from domain.claims import first_fire_at_or_after
from domain.fire_values import Omission
from domain.history import TaskVersion
from domain.read_back import READ_BACK
from domain.runs import Run, RunStatus
from domain.tasks import TaskSpec
from domain.triggers import Calendars, Trigger, fire_times

SECOND = timedelta(seconds=1)
# How far back the search for the occurrence at or before an instant looks: further
# than any trigger's gap between two fire times (a yearly cron, a leap day).
LOOKBACK = timedelta(days=366 * 8)


class Verdict(StrEnum):
    RAN = "ran"
    FAILED = "failed"
    MISSED = "missed"
    SKIPPED = "skipped"
    COALESCED = "coalesced"
    QUEUED = "queued"
    CANCELLED = "cancelled"
    EXCLUDED = "excluded"
    DST_SKIPPED = "dst_skipped"
    NOT_SCHEDULED = "not_scheduled"


@dataclass(frozen=True, slots=True)
class Explanation:
    occurrence: datetime | None
    verdict: Verdict
    detail: str
    runs: list[Run]
    task_version: int | None


def stamp(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


def latest_fire_at_or_before(
    trigger: Trigger, instant: datetime, calendars: Calendars = None
) -> datetime | None:
    """The trigger's last fire time at or before `instant`, None within LOOKBACK.

    Windows ending at `instant` double until one holds a fire time; then the window is
    halved toward its last one (a fire time every second, before days a calendar holds,
    would take one step per fire time: hundreds of thousands). Fire times are whole
    seconds, and `next_fire_time` never goes back as its start moves on."""
    top = instant.replace(microsecond=0)  # the same fire times are at or before it
    back = SECOND
    empty_after = top  # no fire time in (empty_after, top]
    while back <= LOOKBACK:
        start = top - back
        candidate = trigger.next_fire_time(start, calendars)
        if candidate is not None and candidate <= instant:
            # The last fire time at or before `instant` is in (start, empty_after].
            while empty_after - start > SECOND:
                half = int((empty_after - start).total_seconds()) // 2
                middle = start + timedelta(seconds=half)
                found = trigger.next_fire_time(middle, calendars)
                if found is not None and found <= instant:
                    start, candidate = middle, found
                else:
                    empty_after = middle
            return candidate
        empty_after = start
        back *= 2
    return None


# When the trigger has no fire time at or before the instant, how far back the search
# for a wall time it did not fire looks (a calendar excluding every day, a long gap).
_OMISSION_LOOKBACK = timedelta(days=7)


def omitted_occurrence(
    trigger: Trigger,
    fired: datetime | None,
    instant: datetime,
    calendars: Calendars = None,
    version: int | None = None,
) -> Explanation | None:
    """The wall time in (fired, instant] the trigger did not fire, when there is one: it
    is the occurrence just before `instant`. Its verdict is `excluded` (a calendar date
    the trigger excludes) or `dst_skipped` (a wall time a DST gap removed, under
    `gap: skip`); the same core that computes fire times says which (`omitted`)."""
    after = fired if fired is not None else instant - _OMISSION_LOOKBACK
    last = _last_omission(trigger, after, instant, calendars)
    if last is None:
        return None
    wall = f"{last.date.isoformat()} {last.wall.isoformat()}"
    if last.reason == "excluded":
        detail = (
            f"excluded: {wall} is a date of calendar {last.calendar}, which the trigger excludes"
        )
        return Explanation(last.key, Verdict.EXCLUDED, detail, [], version)
    zone = getattr(trigger, "timezone", "UTC")
    detail = f"dst_skipped: {wall} did not exist in {zone} (a DST gap), and the gap policy is skip"
    return Explanation(last.key, Verdict.DST_SKIPPED, detail, [], version)


def _last_omission(
    trigger: Trigger, after: datetime, instant: datetime, calendars: Calendars
) -> Omission | None:
    """The latest wall time in (after, instant] that the trigger did not fire (a roll,
    or a merge into another fire, aside), looked for in windows ending at `instant`
    that double from a second: an annotated listing tells at most MAX_OMISSIONS_TOLD
    omissions, and a trigger firing every second over held dates has tens of thousands
    a day. Where one listing is cut short before `instant`, the next one starts at the
    last omission it told."""
    span = SECOND
    while True:
        start = max(after, instant - span)
        found, floor = None, start
        while True:
            listed = trigger.annotated(floor, 1, calendars)
            gone = [
                o
                for o in listed.omitted
                if floor < o.key <= instant and o.reason in ("excluded", "dst_gap")
            ]
            found = gone[-1] if gone else found
            told = listed.omitted
            if not listed.omitted_truncated or not told or told[-1].key >= instant:
                break
            floor = told[-1].key
        if found is not None or start <= after:
            return found
        span *= 2


def spec_of(version: TaskVersion) -> TaskSpec | None:
    """The task as the version left it; None once deleted."""
    # A past version is read back: a rule added since must not refuse it.
    return (
        None if version.state is None else TaskSpec.model_validate(version.state, context=READ_BACK)
    )


def folded_into(
    trigger: Trigger, occurrence: datetime, run: Run, calendars: Calendars = None
) -> bool:
    """Whether `run`, the next run after `occurrence`, stood for it: a run stands for
    its own occurrence and the `coalesced - 1` fire times just before it."""
    if run.coalesced <= 1:
        return False
    following = fire_times(trigger, occurrence - SECOND, run.coalesced, calendars)
    return sum(1 for at in following if at < run.scheduled_for) <= run.coalesced - 1


def unscheduled_by(
    then: TaskVersion,
    before: TaskSpec | None,
    occurrence: datetime,
    trigger_then: Trigger,
    calendars: Calendars = None,
) -> str | None:
    """Why `then`, the version in force at `occurrence`, never scheduled it, if it did
    not: its trigger had no fire time then (the trigger asked about came later), or
    `then` resumed the task or changed its trigger in that very second, when the
    schedule it replaced (`before`'s) fired in it, so planning started at the next
    second (domain.claims.rescheduled). None when it was scheduled."""
    if first_fire_at_or_after(trigger_then, occurrence, calendars) != occurrence:
        return (
            f"the trigger in force at {stamp(occurrence)} (version {then.version}) "
            "had no fire time then"
        )
    replanned = "enabled" in then.changes or "trigger" in then.changes
    if then.at != occurrence or before is None or not replanned:
        return None
    if first_fire_at_or_after(before.trigger, occurrence, calendars) != occurrence:
        return None
    what = "resumed" if "enabled" in then.changes else "given a new trigger"
    return (
        f"the task was {what} at {stamp(then.at)} by {_actor(then)}, in a second its "
        "schedule fired in, so its schedule started at the next second"
    )


def not_scheduled(
    occurrence: datetime | None, detail: str, version: TaskVersion | None
) -> Explanation:
    number = None if version is None else version.version
    return Explanation(occurrence, Verdict.NOT_SCHEDULED, f"not scheduled: {detail}", [], number)


def paused_detail(paused: TaskVersion, resumed: TaskVersion | None) -> str:
    """ "the task was paused from … to … by …" for the version that paused it."""
    who = "pause_after_failures" if paused.cause == "auto_pause" else _actor(paused)
    until = f" to {stamp(resumed.at)}" if resumed is not None else ""
    return f"the task was paused from {stamp(paused.at)}{until} by {who}"


def _actor(version: TaskVersion) -> str:
    return f"token {version.actor}" if version.actor else "an API request"


def from_runs(
    occurrence: datetime,
    runs: list[Run],
    later: Run | None,
    spec: TaskSpec,
    in_flight: list[Run],
    version: int,
) -> Explanation:
    """The verdict of an occurrence the task was scheduled for: from the runs recorded
    for it (`runs`, newest first), else from the next later run (`later`), which stood
    for it when it folded it (`coalesced`). `in_flight` are the task's runs that held a
    slot, or waited in its queue for one, when a skipped run was claimed."""
    if not runs:
        if later is not None and later.status is RunStatus.MISSED:
            return Explanation(
                occurrence,
                Verdict.MISSED,
                f"missed: folded into missed run {later.id}, {_missed_why(later, spec)}",
                [later],
                version,
            )
        if later is not None:
            others = _counted(later.coalesced - 1, "other occurrence")
            return Explanation(
                occurrence,
                Verdict.COALESCED,
                f"coalesced: run {later.id} for {stamp(later.scheduled_for)} stood for it "
                f"and {others} (catch_up {spec.catch_up})",
                [later],
                version,
            )
        return Explanation(
            occurrence, Verdict.MISSED, "missed: no run was recorded for it", [], version
        )
    runs = standing(runs)
    run = runs[0]
    verdict, detail = _of_run(run, spec, in_flight)
    if run.backfill_id is not None:
        detail += f" (backfill {run.backfill_id}"
        if len(runs) > 1:
            detail += f"; before it, run {runs[1].id}: {runs[1].status.value}"
        detail += ")"
    return Explanation(occurrence, verdict, detail, runs, version)


def standing(runs: list[Run]) -> list[Run]:
    """The runs recorded for one occurrence, the one that stands for it first: the last
    claimed, so that a backfill's run stands for an occurrence whose scheduled run
    failed or was missed (docs/policies.md, "Backfill"); ties keep their order."""
    return sorted(runs, key=lambda run: run.claimed_at, reverse=True)


def backfilled(runs: list[Run]) -> list[Run]:
    """Those of an occurrence's runs that a backfill made."""
    return [run for run in runs if run.backfill_id is not None]


def _late(run: Run) -> int:
    return int((run.claimed_at - run.scheduled_for).total_seconds())


def _missed_why(run: Run, spec: TaskSpec) -> str:
    """Why a MISSED run was not called: claimed past the grace, or (within it) one of
    the oldest of a `catch_up: "all"` backlog longer than `max_catch_up`."""
    late = f"claimed {_late(run)} s after {stamp(run.scheduled_for)}"
    grace = spec.misfire_grace_seconds
    if grace is not None and _late(run) > grace:
        return f"{late}, past the {grace} s grace"
    return (
        f"{late}, older than the newest max_catch_up = {spec.max_catch_up} occurrences "
        f"of the backlog (catch_up {spec.catch_up})"
    )


def _of_run(run: Run, spec: TaskSpec, in_flight: list[Run]) -> tuple[Verdict, str]:
    status = run.status
    if status is RunStatus.SUCCEEDED:
        return Verdict.RAN, f"ran: run {run.id} succeeded after {_counted(run.attempts, 'attempt')}"
    if status is RunStatus.RUNNING:
        return Verdict.RAN, f"ran: run {run.id} is running since {stamp(run.claimed_at)}"
    if status is RunStatus.FAILED:
        return Verdict.FAILED, f"failed: run {run.id} failed: {run.error}"
    if status is RunStatus.MISSED:
        return Verdict.MISSED, f"missed: {_missed_why(run, spec)}"
    if status is RunStatus.SKIPPED:
        limit = spec.max_running_instances
        held, waiting = _slot_holders(in_flight, limit)
        holders = _named_runs(held) or "runs of this task"
        slots = "the only slot" if limit == 1 else f"all {limit} slots"
        detail = f"skipped: {holders} held {slots} (max_running_instances = {limit})"
        if waiting:  # a queue that keeps no more (overlap buffer_one)
            queue = _named_runs(waiting)
            detail += f", and {queue} already waited for one (overlap {spec.overlap})"
        return Verdict.SKIPPED, detail
    if status is RunStatus.CANCELLED:
        return Verdict.CANCELLED, f"cancelled: run {run.id}: {run.error}"
    return Verdict.QUEUED, f"queued: run {run.id} waits for a slot"


def _slot_holders(in_flight: list[Run], limit: int) -> tuple[list[Run], list[Run]]:
    """The runs in flight at a skip that held the slots, and those queued behind them.
    A run's stored start is its call's (written with its outcome), a little after its
    claim, and a queued run started only once a holder ended: so the `limit` that started
    first held the slots."""
    ordered = sorted(
        in_flight, key=lambda r: (r.started_at is None, r.started_at or r.claimed_at, r.id)
    )
    return ordered[:limit], ordered[limit:]


def _named_runs(runs: list[Run]) -> str:
    if not runs:
        return ""
    word = "run" if len(runs) == 1 else "runs"
    return f"{word} " + ", ".join(str(r.id) for r in runs)


def _counted(count: int, noun: str) -> str:
    """ "1 attempt", "2 attempts"."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
