"""What httpx's client did for the executor and the executor now does itself, since it
calls its pool directly (docs/adr/0010): a compressed answer's excerpt is decoded, a
URL's user:password becomes Basic auth, Retry-After is read from the answer."""

from __future__ import annotations

import base64
import gzip

from adapters.http import HttpExecutor
from domain.read_back import READ_BACK
from domain.runs import RunStatus
from domain.tasks import HttpTarget
from tests.adapters.http.builders import call_once, http_task, make_run
from tests.fixtures.target import RecordingTarget, Response


async def test_a_compressed_answer_is_excerpted_decoded(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    body = gzip.compress(b'{"report": "done"}')
    recording_target.respond("/", Response(200, body, headers={"Content-Encoding": "gzip"}))

    outcome = await call_once(executor, recording_target.url("/"))

    assert outcome.status is RunStatus.SUCCEEDED
    assert outcome.response_excerpt == '{"report": "done"}'


async def test_a_stored_url_with_user_and_password_is_called_with_basic_auth(
    executor: HttpExecutor, recording_target: RecordingTarget
) -> None:
    # A target is no longer written with credentials in its URL (they would be kept
    # and shown in the clear: a 422, tests/domain/test_task_targets.py); one stored
    # before that rule is still called as it was.
    url = recording_target.url("/").replace("http://", "http://reporter:s3cret@")
    target = HttpTarget.model_validate({"url": url}, context=READ_BACK)
    task = http_task(recording_target.url("/")).model_copy(update={"target": target})

    outcome = await executor.execute(task, make_run(task), None)

    [request] = recording_target.received()
    token = base64.b64encode(b"reporter:s3cret").decode()
    assert request.header("Authorization") == f"Basic {token}"
    assert outcome.status is RunStatus.SUCCEEDED
