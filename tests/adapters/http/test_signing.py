"""Signed calls: verified with the `standardwebhooks` package, an implementation of
Standard Webhooks that is not ours, against what a real local target received."""

from __future__ import annotations

import base64
import time

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from adapters.http import HttpExecutor, HttpExecutorSettings
from adapters.http.signing import InvalidSigningSecret, Signer, parse_signing_secrets
from tests.adapters.http.builders import FAST_RETRY, http_task, make_run
from tests.adapters.http.conftest import MakeExecutor
from tests.fixtures.target import Recorded, RecordingTarget, Response

OLD = "whsec_" + base64.b64encode(b"the old key, thirty-two bytes!!!").decode()
NEW = "whsec_" + base64.b64encode(b"a brand new key of 24 b.").decode()
UNKNOWN = "whsec_" + base64.b64encode(b"a key nobody configured").decode()


def signed_executor(make_executor: MakeExecutor, secrets: str) -> HttpExecutor:
    return make_executor(HttpExecutorSettings(signer=Signer(parse_signing_secrets(secrets))))


def verify(secret: str, request: Recorded) -> object:
    return Webhook(secret).verify(request.body, request.headers)


async def test_a_signed_call_verifies_with_a_standard_webhooks_library(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    executor = signed_executor(make_executor, OLD)
    task = http_task(recording_target.url("/"), body={"report": "nightly", "ü": "é"})
    run = make_run(task)

    before = int(time.time())
    await executor.execute(task, run, None)

    received = recording_target.received()[0]
    assert verify(OLD, received) == {"report": "nightly", "ü": "é"}
    assert received.header("webhook-id") == received.header("Idempotency-Key")
    assert before <= int(received.header("webhook-timestamp") or 0) <= int(time.time())
    with pytest.raises(WebhookVerificationError):
        verify(UNKNOWN, received)


async def test_a_tampered_body_does_not_verify(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    executor = signed_executor(make_executor, OLD)
    task = http_task(recording_target.url("/"), body={"amount": 1})
    await executor.execute(task, make_run(task), None)

    received = recording_target.received()[0]
    with pytest.raises(WebhookVerificationError):
        Webhook(OLD).verify(b'{"amount":100}', received.headers)


async def test_several_secrets_sign_with_each_for_a_rotation(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    executor = signed_executor(make_executor, f"{OLD} {NEW}")
    task = http_task(recording_target.url("/"), body=[1, 2])
    await executor.execute(task, make_run(task), None)

    received = recording_target.received()[0]
    assert len((received.header("webhook-signature") or "").split(" ")) == 2
    assert verify(OLD, received) == verify(NEW, received) == [1, 2]


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_a_call_without_a_body_is_signed_over_the_empty_body(
    make_executor: MakeExecutor, recording_target: RecordingTarget, method: str
) -> None:
    executor = signed_executor(make_executor, OLD)
    task = http_task(recording_target.url("/"), method=method)
    await executor.execute(task, make_run(task), None)

    received = recording_target.received()[0]
    assert received.body == b""
    assert Webhook(OLD).verify(received.body, received.headers, json_parse=False) is None


async def test_a_rendered_template_body_is_signed_as_sent(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    executor = signed_executor(make_executor, OLD)
    task = http_task(recording_target.url("/"), template=True, body={"for": "{{ scheduled_for }}"})
    await executor.execute(task, make_run(task), None)

    assert verify(OLD, recording_target.received()[0]) == {"for": "2026-03-09T06:30:00Z"}


async def test_every_attempt_has_the_same_id_and_a_signature_of_its_own(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    recording_target.respond("/", Response(503), Response(503), Response(200))
    executor = signed_executor(make_executor, OLD)
    task = http_task(recording_target.url("/"), retry=FAST_RETRY, body={"n": 1})
    await executor.execute(task, make_run(task), None)

    attempts = recording_target.received()
    assert len(attempts) == 3
    assert len({a.header("webhook-id") for a in attempts}) == 1
    for attempt in attempts:
        assert verify(OLD, attempt) == {"n": 1}


@pytest.mark.parametrize("template", [False, True], ids=["plain", "template"])
async def test_a_signature_the_target_echoes_is_not_kept_in_the_run(
    make_executor: MakeExecutor, recording_target: RecordingTarget, template: bool
) -> None:
    # Whoever may read runs (a read-only token, an event's receiver) could otherwise
    # replay the call while its timestamp is fresh: a dry run shows "***" for the same
    # reason. Plain targets send a cached head, templated ones a request of their own.
    recording_target.respond("/", Response(500, echo=True))
    executor = signed_executor(make_executor, f"{OLD} {NEW}")
    task = http_task(recording_target.url("/"), template=template, body={"n": 1})

    outcome = await executor.execute(task, make_run(task), None)

    sent = recording_target.received()[0].header("webhook-signature") or ""
    signatures = [part.removeprefix("v1,") for part in sent.split(" ")]
    assert len(signatures) == 2
    assert outcome.response_excerpt is not None
    assert "webhook-signature: ***" in outcome.response_excerpt.lower()
    assert not any(signature in outcome.response_excerpt for signature in signatures)
    assert outcome.response_excerpt.count("webhook-id") == 1  # the rest is as sent


async def test_without_a_secret_nothing_is_signed(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    task = http_task(recording_target.url("/"))
    await executor.execute(task, make_run(task), None)

    headers = {name.lower() for name in recording_target.received()[0].headers}
    assert not headers & {"webhook-id", "webhook-timestamp", "webhook-signature"}


async def test_a_dry_run_shows_no_signature_that_could_be_replayed(
    make_executor: MakeExecutor,
) -> None:
    executor = signed_executor(make_executor, OLD)
    task = http_task("http://reports.test/", body={"a": 1})
    run = make_run(task)

    rendered = await executor.render(task, run, None, redact=True)

    assert rendered.headers["webhook-signature"] == "***"
    assert rendered.headers["webhook-id"] == rendered.headers["Idempotency-Key"]
    assert rendered.headers["webhook-timestamp"].isdigit()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("secret", "the secret does not start with 'whsec_'"),
        ("whsec_not*base64", "the secret is not 'whsec_' followed by base64"),
        ("whsec_" + base64.b64encode(b"short").decode(), "the secret holds 5 bytes"),
        (f"{OLD} nope", "secret 2 does not start with 'whsec_'"),
    ],
)
def test_a_bad_secret_is_refused_without_being_echoed(value: str, message: str) -> None:
    with pytest.raises(InvalidSigningSecret) as raised:
        parse_signing_secrets(value)

    assert str(raised.value).startswith(message)
    assert "not*base64" not in str(raised.value) and "nope" not in str(raised.value)


def test_unpadded_and_blank_secrets_are_understood() -> None:
    unpadded = OLD.rstrip("=")
    assert unpadded != OLD
    assert parse_signing_secrets(unpadded) == parse_signing_secrets(OLD)
    assert parse_signing_secrets("  ") == ()
