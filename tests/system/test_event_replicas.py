"""Three real `serve` replicas on one PostgreSQL database send the events of failing
tasks to a real receiver; the replica that is sending is killed with SIGKILL while its
deliveries are in flight. Every event is still delivered, signed, and a receiver that
dedupes on `webhook-id` sees each exactly once (docs/events.md)."""

from __future__ import annotations

import base64
import signal
import time
from collections import Counter

import httpx
import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row
from standardwebhooks.webhooks import Webhook

from tests.entrypoints.live import LiveServer
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import wait_for
from tests.system.support import create

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.fleet]

SECRET = "whsec_" + base64.b64encode(b"three-replicas-event-secret-32b!").decode()
TASKS = 4
HANG = 120.0  # seconds the receiver holds the first deliveries: past the kill


def test_every_event_is_delivered_when_the_sending_replica_is_killed(
    database_url: str, schema: str, recording_target: RecordingTarget
) -> None:
    environ = {
        "SCHEDULER_DATABASE_URL": database_url,
        "SCHEDULER_SCHEMA": schema,
        "SCHEDULER_MAX_POLL_INTERVAL": "1",
        "SCHEDULER_LOG_LEVEL": "WARNING",
        "SCHEDULER_SIGNING_SECRET": SECRET,
        "SCHEDULER_EVENTS_URL": recording_target.url("/events"),
        "SCHEDULER_EVENTS_POLL_INTERVAL": "0.2",
    }
    recording_target.respond("/job", Response(status=500, body=b"down"))
    recording_target.respond("/events", Response(status=204, body=b"", delay=HANG))
    replicas = [LiveServer({**environ, "SCHEDULER_REPLICA": f"replica-{k}"}) for k in range(3)]
    doomed = replicas[2]
    try:
        # The doomed replica alone first: the first deliveries are surely its own.
        doomed.start()
        for k in range(TASKS):
            create(doomed.url, f"failing-{k}", recording_target.url("/job"), timeout=2)
        wait_for(lambda: bool(recording_target.received("/events")), 30, "a first delivery")
        for replica in replicas[:2]:
            replica.start()
        in_flight = {r.header("webhook-id") for r in recording_target.received("/events")}
        # The receiver answers at once from now on; the doomed replica never hears it.
        recording_target.respond("/events", Response(status=204, body=b""))
        assert doomed.stop(signal.SIGKILL) == -signal.SIGKILL
        killed_at = time.monotonic()

        with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:

            def survivors_sent() -> bool:
                # The survivors go on failing runs and sending their events: one of those
                # (not a retry of one in flight at the kill) has reached the receiver,
                # and more events are stored than there are tasks.
                sent = {
                    r.header("webhook-id")
                    for r in recording_target.received("/events")
                    if r.received_at > killed_at
                }
                row = conn.execute(
                    sql.SQL("SELECT count(*) AS n FROM {}.events").format(sql.Identifier(schema))
                ).fetchone()
                return bool(sent - in_flight) and row is not None and row["n"] > TASKS

            wait_for(survivors_sent, 60, "the survivors to send events of their own")
            for k in range(TASKS):
                pause = httpx.post(f"{replicas[0].url}/tasks/failing-{k}/pause", timeout=10)
                assert pause.status_code == 200, pause.text

            def settled() -> bool:
                # The killed replica's runs end "replica lost" (their own events), and its
                # claimed events lapse to the survivors: nothing is left to send.
                row = conn.execute(
                    sql.SQL(
                        "SELECT (SELECT count(*) FROM {s}.runs WHERE status = 'running')"
                        " + (SELECT count(*) FROM {s}.events WHERE status <> 'sent') AS n"
                    ).format(s=sql.Identifier(schema))
                ).fetchone()
                return row is not None and row["n"] == 0

            wait_for(settled, 150, "every run to end and every event to be sent")
            events = conn.execute(
                sql.SQL("SELECT id, type, attempts FROM {}.events").format(sql.Identifier(schema))
            ).fetchall()
        for replica in replicas[:2]:
            assert replica.stop() == 0, replica.log()
    finally:
        for replica in replicas:
            replica.stop(signal.SIGKILL)

    deliveries = recording_target.received("/events")
    webhook = Webhook(SECRET)
    payloads = [webhook.verify(r.body, r.headers) for r in deliveries]  # all signed
    received = Counter(r.header("webhook-id") for r in deliveries)
    stored = {str(event["id"]) for event in events}

    # A receiver that dedupes on webhook-id sees every event once, and nothing else.
    assert set(received) == stored
    assert {p["data"]["event_id"] for p in payloads} == stored
    assert len(stored) > TASKS
    # The deliveries the killed replica had in flight were made again by a survivor.
    assert in_flight and all(received[webhook_id] >= 2 for webhook_id in in_flight)
    retried = {str(e["id"]) for e in events if e["attempts"] >= 2}
    assert in_flight <= retried
    kinds = Counter(event["type"] for event in events)
    assert kinds["run.failed"] > 0
    assert set(kinds) <= {"run.failed", "run.skipped", "run.missed"}
