"""The soak's invariants, checked from outside: the run rows and the target's records.

Each check returns the evidence against it (an empty list when it holds), so a broken
invariant prints what broke it. docs/reliability.md says what each one means.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bench.soak_target import Call

REPLICA_LOST = "replica lost"
ACCOUNTED = "sched-"  # tasks whose every occurrence must be accounted for


@dataclass
class Evidence:
    """The rows a check reads, as plain dicts from PostgreSQL."""

    tasks: dict[Any, dict[str, Any]]
    runs: list[dict[str, Any]]
    calls: list[Call]
    api: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, outcome)
    swept_by: datetime | None = None  # leases that expired before this must be swept
    events: list[dict[str, Any]] = field(default_factory=list)  # bodies the target received


def _scheduled(r: dict[str, Any]) -> bool:
    """A run the engine made for an occurrence: neither a manual run (an instant of its
    own) nor a backfill's (an occurrence run again, under the occurrence's key)."""
    return not r["manual"] and r.get("backfill_id") is None


def unique_claims(ev: Evidence) -> list[str]:
    """No occurrence of a task is claimed twice: (task, scheduled_for) is unique among
    the runs the engine made (manual and backfilled runs are not claims)."""
    seen = Counter((r["task_id"], r["scheduled_for"]) for r in ev.runs if _scheduled(r))
    return [
        f"{_name(ev, t)} occurrence {s.isoformat()} claimed {n} times"
        for (t, s), n in seen.items()
        if n > 1
    ]


def _name(ev: Evidence, task_id: Any) -> str:
    task = ev.tasks.get(task_id)
    return f"task {task_id} ({task['name'] if task else 'deleted'})"


def one_run_per_key(ev: Evidence) -> list[str]:
    """Every call that carried one Idempotency-Key came from one run, and no more calls
    than that run's attempts allow (a retry keeps the key; a second run never shares it).
    A backfill runs an occurrence again under its key on purpose: its runs are the one
    exception, each still called no more than its attempts allow."""
    backfilled = {str(r["id"]) for r in ev.runs if r.get("backfill_id") is not None}
    runs_of: dict[str, set[str]] = defaultdict(set)
    calls_of: Counter[tuple[str, str]] = Counter()
    for call in ev.calls:
        if call.run_id not in backfilled:
            runs_of[call.key].add(call.run_id)
        calls_of[(call.key, call.run_id)] += 1
    limit = {
        str(t): task["target"].get("retry", {}).get("max_attempts", 1)
        for t, task in ev.tasks.items()
    }
    broken = [f"key {k} called by runs {sorted(ids)}" for k, ids in runs_of.items() if len(ids) > 1]
    for (key, run_id), n in calls_of.items():
        if n > limit.get(key.split(":")[0], 1):
            broken.append(f"key {key} called {n} times by run {run_id}")
    return broken


def calls_match_runs(ev: Evidence) -> list[str]:
    """A run recorded succeeded was called; a missed or skipped run never was; no call
    came from a run that does not exist."""
    called = {c.run_id for c in ev.calls}
    known = {str(r["id"]) for r in ev.runs}
    broken = [f"call from unknown run {i}" for i in sorted(called - known)]
    for r in ev.runs:
        rid = str(r["id"])
        if r["status"] == "succeeded" and rid not in called:
            broken.append(f"run {rid} succeeded without a call")
        if r["status"] in ("missed", "skipped") and rid in called:
            broken.append(f"run {rid} {r['status']} but called")
    return broken


def zombie_rule(ev: Evidence) -> list[str]:
    """Nothing acts on a lease it no longer holds: no call arrived after its run's lease
    expired, and no outcome but the sweep's "replica lost" finished after the lease."""
    lease = {str(r["id"]): r["lease_expires_at"] for r in ev.runs}
    broken = []
    for call in ev.calls:
        expires = lease.get(call.run_id)
        if expires is not None and call.received_at > expires.timestamp() + 1:  # whole seconds
            late = call.received_at - expires.timestamp()
            broken.append(f"run {call.run_id} called {late:.1f} s after its lease")
    for r in ev.runs:
        expires, finished = r["lease_expires_at"], r["finished_at"]
        if expires and finished and r["error"] != REPLICA_LOST and finished > expires:
            broken.append(f"run {r['id']} recorded {r['status']} after its lease {expires}")
    return broken


def none_left_running(ev: Evidence) -> list[str]:
    """Once the faults stop, no run stays running past its lease (the sweep of a live
    replica ends it "replica lost"), and after every replica stopped cleanly (each
    records what it ran) none is running at all."""
    if ev.swept_by is None:
        return ["the sweep was never waited for"]
    return [
        f"run {r['id']} of {r['replica']} claimed {r['claimed_at']} still running"
        f" (lease {r['lease_expires_at']}, swept by {ev.swept_by})"
        for r in ev.runs
        if r["status"] == "running"
    ]


def no_occurrence_lost(ev: Evidence) -> list[str]:
    """Every occurrence of an accounted task, from its first run to its last, is stood
    for by exactly one run: the runs' `coalesced` counts add up to the occurrences."""
    by_task: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for r in ev.runs:
        if _scheduled(r):
            by_task[r["task_id"]].append(r)
    broken = []
    for task_id, task in ev.tasks.items():
        if not task["name"].startswith(ACCOUNTED):
            continue
        runs = sorted(by_task.get(task_id, []), key=lambda r: r["scheduled_for"])
        if not runs:
            broken.append(f"{task['name']}: no run at all")
            continue
        every = step_of(task["trigger"])
        first = runs[0]["scheduled_for"].timestamp() - (runs[0]["coalesced"] - 1) * every
        expected = round((runs[-1]["scheduled_for"].timestamp() - first) / every) + 1
        got = sum(r["coalesced"] for r in runs)
        if got != expected:
            broken.append(f"{task['name']}: {expected} occurrences, runs stand for {got}")
    return broken


def only_503(ev: Evidence) -> list[str]:
    """The API answered no 5xx but 503 (the database out of reach)."""
    return [
        f"{kind}: {n} answers {outcome}"
        for (kind, outcome), n in ev.api.items()
        if outcome.startswith("5") and outcome != "503"
    ]


def events_match_runs(ev: Evidence) -> list[str]:
    """Every `run.failed` event the target received names a run recorded `failed`."""
    status = {str(r["id"]): r["status"] for r in ev.runs}
    broken = []
    for body in ev.events:
        if body.get("type") != "run.failed":
            continue
        run_id = str(body.get("data", {}).get("run", {}).get("id"))
        if status.get(run_id) != "failed":
            broken.append(f"run.failed event for run {run_id}, recorded {status.get(run_id)}")
    return broken


def step_of(trigger: dict[str, Any]) -> float:
    """Seconds between occurrences of the soak's triggers: an interval, an every-second
    cron, a daily calendar; a one-shot has one occurrence, so any step will do."""
    if trigger["kind"] == "interval":
        return float(trigger["every"])
    if trigger["kind"] == "calendar":
        return 86400.0
    return 1.0


CHECKS: Sequence[Callable[[Evidence], list[str]]] = (
    unique_claims,
    one_run_per_key,
    calls_match_runs,
    zombie_rule,
    none_left_running,
    no_occurrence_lost,
    only_503,
    events_match_runs,
)


def check(ev: Evidence) -> dict[str, list[str]]:
    return {fn.__name__: fn(ev) for fn in CHECKS}


def figures(ev: Evidence) -> dict[str, Any]:
    """What the run did: runs by status, occurrences, calls, lateness of first calls."""
    first: dict[str, float] = {}
    for call in ev.calls:
        if call.key not in first:
            first[call.key] = call.received_at
    lateness = sorted(
        at - int(key.split(":")[1])
        for key, at in first.items()
        if key.count(":") == 1 and key.split(":")[1].isdigit()
    )
    return {
        "runs": len(ev.runs),
        "by_status": dict(Counter(r["status"] for r in ev.runs)),
        "replica_lost": sum(1 for r in ev.runs if r["error"] == REPLICA_LOST),
        "occurrences": sum(r["coalesced"] for r in ev.runs if _scheduled(r)),
        "manual_runs": sum(1 for r in ev.runs if r["manual"]),
        "backfilled_runs": sum(1 for r in ev.runs if r.get("backfill_id") is not None),
        "events": dict(Counter(str(body.get("type")) for body in ev.events)),
        "calls": len(ev.calls),
        "lateness_p50": _quantile(lateness, 0.50),
        "lateness_p99": _quantile(lateness, 0.99),
    }


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]
