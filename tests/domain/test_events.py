"""The event rules as pure functions: which cause raises which event, where it goes,
and how attempts move an event along its retry schedule to sent or dropped."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest

from domain.events import (
    CLAIM_LEASE,
    DELIVERY_WINDOW,
    Delivery,
    Destination,
    Event,
    EventRules,
    EventStatus,
    TaskRef,
    attempted,
    claimed,
    lapsed,
    new_event,
    outcome_events,
    retry_wait,
)
from domain.outcomes import TaskCount
from domain.runs import Run, RunStatus
from domain.tasks import EventType, Notify

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
GLOBAL = "http://events.test/all"
TASK = TaskRef(uuid4(), "nightly-report")


def run(status: RunStatus, *, manual: bool = False, **fields: Any) -> Run:
    return Run(
        id=uuid4(),
        task_id=TASK.id,
        scheduled_for=T0,
        claimed_at=T0,
        finished_at=T0 + timedelta(seconds=3),
        status=status,
        manual=manual,
        replica="r:1",
        **fields,
    )


def types(events: list[Event]) -> list[str]:
    return [event.type.value for event in events]


def on_outcome(rules: EventRules, finished: Run, task: TaskRef = TASK, **how: Any) -> list[Event]:
    fields = {"failing_before": False, "counted": not finished.manual, "paused": False} | how
    return rules.on_outcome(task, finished, **fields)


def test_the_waits_double_from_5_seconds_to_10_minutes() -> None:
    waits = [retry_wait(n).total_seconds() for n in range(1, 12)]

    assert waits == [5, 10, 20, 40, 80, 160, 320, 600, 600, 600, 600]
    assert retry_wait(10_000) == timedelta(minutes=10)


def test_an_event_undelivered_for_a_day_is_dropped_with_all_its_attempts_counted() -> None:
    event = new_event(EventType.RUN_FAILED, TASK, None, T0, Destination(url=GLOBAL))
    now, attempts = T0, []
    while event.status is EventStatus.PENDING:
        assert event.next_attempt_at is not None
        now = event.next_attempt_at
        event = claimed(event, now)
        attempts.append(now)
        event = attempted(event, Delivery(False, 503, "HTTP 503"), now)

    assert event.status is EventStatus.DROPPED
    assert event.next_attempt_at is None and event.finished_at == now
    assert (event.last_error, event.http_status) == ("HTTP 503", 503)
    # 5 s … 10 min (8 waits to reach it), then every 10 min until the next would start
    # past the day: every attempt started within it, and one more would not.
    assert attempts[-1] <= T0 + DELIVERY_WINDOW < attempts[-1] + timedelta(minutes=10)
    assert [b - a for a, b in itertools.pairwise(attempts)][:9] == [
        timedelta(seconds=s) for s in (5, 10, 20, 40, 80, 160, 320, 600, 600)
    ]
    assert event.attempts == len(attempts) == 9 + (24 * 3600 - 1235) // 600


def test_a_delivered_event_is_sent_and_keeps_its_id() -> None:
    event = claimed(new_event(EventType.RUN_MISSED, TASK, None, T0, Destination(url=GLOBAL)), T0)

    sent = attempted(event, Delivery(True, 204), T0 + timedelta(seconds=1))

    assert (sent.status, sent.attempts, sent.http_status) == (EventStatus.SENT, 1, 204)
    assert sent.id == event.id and sent.payload == event.payload
    assert sent.next_attempt_at is None and sent.finished_at == T0 + timedelta(seconds=1)


def test_a_claim_holds_the_event_for_its_lease_and_a_lapsed_one_past_the_deadline_drops() -> None:
    event = new_event(EventType.RUN_FAILED, TASK, None, T0, Destination(url=GLOBAL))

    held = claimed(event, T0)

    assert held.next_attempt_at == T0 + CLAIM_LEASE and held.attempts == 1
    assert lapsed(held, T0 + DELIVERY_WINDOW) is None
    dropped = lapsed(held, T0 + DELIVERY_WINDOW + timedelta(seconds=1))
    assert dropped is not None and dropped.status is EventStatus.DROPPED


def test_the_body_names_the_event_the_task_and_the_run() -> None:
    failed = run(RunStatus.FAILED, error="HTTP 500", http_status=500)

    [event] = on_outcome(EventRules(GLOBAL), failed)

    assert event.payload == {
        "type": "run.failed",
        "timestamp": "2026-03-02T12:00:03Z",
        "data": {
            "event_id": str(event.id),
            "task": {"id": str(TASK.id), "name": "nightly-report"},
            "run": {
                **failed.model_dump(mode="json"),
                "scheduled_for": "2026-03-02T12:00:00Z",
                "claimed_at": "2026-03-02T12:00:00Z",
                "finished_at": "2026-03-02T12:00:03Z",
            },
        },
    }
    assert event.deadline == T0 + timedelta(seconds=3) + DELIVERY_WINDOW


@pytest.mark.parametrize(
    ("status", "raised"),
    [
        (RunStatus.MISSED, ["run.missed"]),
        (RunStatus.SKIPPED, ["run.skipped"]),
        (RunStatus.RUNNING, []),
    ],
)
def test_a_claim_raises_missed_and_skipped(status: RunStatus, raised: list[str]) -> None:
    assert types(EventRules(GLOBAL).on_claim(TASK, run(status))) == raised


def test_a_success_after_failures_counted_before_failing_was_kept_is_a_recovery() -> None:
    # A task row of a database upgraded from before `failing` existed: failures counted,
    # `failing` false. Its next scheduled success is still a recovery; then no more.
    count = TaskCount(
        enabled=True,
        consecutive_failures=2,
        failing=False,
        pause_after_failures=None,
        next_fire_at=T0,
        next_run_at=T0,
        updated_at=T0,
        version=3,
    )
    firsts = [run(RunStatus.RUNNING, lease_expires_at=T0) for _ in range(2)]
    ended = [r.model_copy(update={"status": RunStatus.SUCCEEDED}) for r in firsts]
    events = outcome_events(EventRules(GLOBAL), {TASK.id: TASK}, {TASK.id: count}, ended)
    assert types(events) == ["task.recovered"]
    assert events[0].run_id == ended[0].id


def test_outcomes_raise_failed_paused_and_recovered() -> None:
    rules = EventRules(GLOBAL)

    assert types(on_outcome(rules, run(RunStatus.FAILED))) == ["run.failed"]
    assert types(on_outcome(rules, run(RunStatus.FAILED), paused=True)) == [
        "run.failed",
        "task.auto_paused",
    ]
    assert types(on_outcome(rules, run(RunStatus.SUCCEEDED), failing_before=True)) == [
        "task.recovered"
    ]
    assert on_outcome(rules, run(RunStatus.SUCCEEDED)) == []  # nothing to recover from
    assert on_outcome(rules, run(RunStatus.CANCELLED)) == []
    # A manual run does not count, so it recovers nothing; its failure is still told.
    manual = run(RunStatus.SUCCEEDED, manual=True)
    assert on_outcome(rules, manual, failing_before=True) == []
    assert types(on_outcome(rules, run(RunStatus.FAILED, manual=True))) == ["run.failed"]


def test_a_tasks_notify_replaces_the_global_url_and_chooses_its_events() -> None:
    notify = Notify(
        url="http://team.test/hook",
        events=[EventType.TASK_AUTO_PAUSED],
        auth={"type": "bearer", "token_env": "TEAM_TOKEN"},
        headers_env={"X-Key": "TEAM_KEY"},
    )
    task = TaskRef(TASK.id, TASK.name, notify)

    events = on_outcome(EventRules(GLOBAL), run(RunStatus.FAILED), task, paused=True)

    assert types(events) == ["task.auto_paused"]  # run.failed is not among its events
    assert events[0].destination == Destination(
        url="http://team.test/hook", auth=notify.auth, headers_env={"X-Key": "TEAM_KEY"}
    )


def test_without_notify_or_a_global_url_nothing_is_raised() -> None:
    assert on_outcome(EventRules(), run(RunStatus.FAILED), paused=True) == []
    assert [e.destination.url for e in on_outcome(EventRules(GLOBAL), run(RunStatus.FAILED))] == [
        GLOBAL
    ]


def test_notify_lists_each_event_once_and_at_least_one() -> None:
    assert Notify(url="http://t.test/").events == list(EventType)
    with pytest.raises(ValueError, match="repeat"):
        Notify(url="http://t.test/", events=["run.failed", "run.failed"])
    with pytest.raises(ValueError):
        Notify(url="http://t.test/", events=[])
    with pytest.raises(ValueError):
        Notify(url="http://t.test/", events=["backfill.started"])
