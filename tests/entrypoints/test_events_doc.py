"""docs/events.md as written: its secret recipe makes a secret the scheduler accepts, and
its receiver verifies the scheduler's signed calls with the `standardwebhooks` package."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from adapters.http import HttpExecutor, HttpExecutorSettings
from adapters.http.signing import Signer, parse_signing_secrets
from domain.runs import RunStatus
from tests.adapters.http.builders import http_task, make_run
from tests.entrypoints.live import ROOT, free_port

DOC = ROOT / "docs" / "events.md"


def block(language: str, marker: str | None = None) -> str:
    text = DOC.read_text()
    prefix = rf"<!-- test: {marker} -->\n" if marker else ""
    found = re.search(prefix + rf"```{language}\n(.*?)```", text, re.DOTALL)
    assert found is not None, f"no {language} block {marker or ''} in {DOC}"
    return found.group(1)


def make_secret() -> str:
    command = block("sh").strip().removeprefix("export ")
    recipe = re.fullmatch(r'SCHEDULER_SIGNING_SECRET="whsec_\$\(python3 -c (.*)\)"', command)
    assert recipe is not None, command
    script = recipe.group(1).strip("'")
    made = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    return "whsec_" + made.stdout.strip()


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """The documented receiver, running; its URL, its secret and its output file."""
    secret = make_secret()
    parse_signing_secrets(secret)  # the recipe's secret is one the scheduler accepts
    script = tmp_path / "receiver.py"
    script.write_text(block("python", "receiver"))
    output = tmp_path / "out.txt"
    port = free_port()
    environ = {**os.environ, "SCHEDULER_SIGNING_SECRET": secret, "PORT": str(port)}
    with output.open("w") as out:
        process = subprocess.Popen([sys.executable, str(script)], env=environ, stdout=out)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise AssertionError("the receiver did not start") from None
                time.sleep(0.05)
        yield url, secret, output
    finally:
        process.terminate()
        process.wait(10)


async def test_the_documented_receiver_accepts_signed_calls_once_per_id(
    receiver: tuple[str, str, Path],
) -> None:
    url, secret, output = receiver
    signed = HttpExecutor(
        HttpExecutorSettings(signer=Signer(parse_signing_secrets(secret))), environ={}
    )
    task = http_task(url, body={"report": "nightly"})
    run = make_run(task)
    try:
        first = await signed.execute(task, run, None)
        again = await signed.execute(task, run, None)  # the same webhook-id
        later = make_run(task, scheduled_for=run.scheduled_for + timedelta(minutes=1))
        other = await signed.execute(task, later, None)  # another occurrence, another id
    finally:
        await signed.close()

    assert [o.http_status for o in (first, again, other)] == [204, 204, 204]
    assert output.read_text().splitlines() == [
        f"{task.id}:{int(occurrence.scheduled_for.timestamp())} {{'report': 'nightly'}}"
        for occurrence in (run, later)
    ]


@pytest.mark.parametrize("secret", [None, "whsec_" + "QUFBQUFBQUFBQUFBQUFBQUFBQUE="])
async def test_the_documented_receiver_refuses_an_unsigned_or_wrongly_signed_call(
    receiver: tuple[str, str, Path], secret: str | None
) -> None:
    url, _, output = receiver
    signer = Signer(parse_signing_secrets(secret or ""))
    executor = HttpExecutor(HttpExecutorSettings(signer=signer), environ={})
    task = http_task(url, body={"report": "nightly"})
    try:
        outcome = await executor.execute(task, make_run(task), None)
    finally:
        await executor.close()

    assert (outcome.status, outcome.http_status) == (RunStatus.FAILED, 401)
    assert output.read_text() == ""


async def test_the_documented_receiver_accepts_a_signed_call_without_a_body(
    receiver: tuple[str, str, Path],
) -> None:
    # `Webhook.verify` json-decodes what it verified: "" raised JSONDecodeError, an
    # error the receiver did not catch, so the call got no answer.
    url, secret, output = receiver
    signed = HttpExecutor(
        HttpExecutorSettings(signer=Signer(parse_signing_secrets(secret))), environ={}
    )
    task = http_task(url)
    run = make_run(task)
    try:
        outcome = await signed.execute(task, run, None)
    finally:
        await signed.close()

    assert outcome.http_status == 204
    key = f"{task.id}:{int(run.scheduled_for.timestamp())}"
    assert output.read_text().splitlines() == [f"{key} None"]


def test_the_documented_key_length_is_what_the_scheduler_takes() -> None:
    # events.md and api.md once disagreed (24 to 64 bytes; at least 16).
    for doc in (DOC, ROOT / "docs" / "api.md"):
        text = " ".join(doc.read_text().split())
        assert "at least 16 bytes" in text and "recommends 24 to 64 bytes" in text, doc
    for size in (16, 23, 65):
        parse_signing_secrets("whsec_" + base64.b64encode(b"k" * size).decode())
    with pytest.raises(ValueError, match="15 bytes"):
        parse_signing_secrets("whsec_" + base64.b64encode(b"k" * 15).decode())
