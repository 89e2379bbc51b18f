"""Requests a fuzzing audit sent that answered 500: each is a 4xx problem document now,
naming what is wrong, and nothing is written."""

from __future__ import annotations

import base64
import hashlib

import pytest

from application.pagination import CURSOR_KEY
from tests.entrypoints.helpers import Client, assert_problem, cron_task, fields_of

JSON = {"Content-Type": "application/json"}
PATCH = {"Content-Type": "application/merge-patch+json"}


def deep(levels: int) -> str:
    return '{"a": ' + "[" * levels + "]" * levels + "}"


DEEP = deep(100_000)  # past the JSON decoder of every Python tested (3.13 reads 5,000)


async def created(api: Client) -> str:
    answer = await api.post("/tasks", json=cron_task("http://127.0.0.1:9/"))
    assert answer.status_code == 201, answer.text
    task_id: str = answer.json()["id"]
    return task_id


async def test_a_body_nested_far_too_deep_is_a_400_on_every_route(api: Client) -> None:
    task_id = await created(api)

    answers = [
        await api.patch(f"/tasks/{task_id}", content=DEEP, headers=PATCH),
        await api.patch(f"/tasks/{task_id}", content=deep(500), headers=PATCH),
        await api.put("/tasks/nightly-report", content=DEEP, headers=JSON),
        await api.post("/tasks/apply", content=DEEP, headers=JSON),
        await api.post(f"/tasks/{task_id}/pause", content=DEEP, headers=JSON),
    ]

    for answer in answers:
        assert (
            "nests arrays and objects more than 200 deep" in assert_problem(answer, 400)["detail"]
        )
    assert (await api.get(f"/tasks/{task_id}")).json()["version"] == 1


async def test_a_member_named_by_a_lone_surrogate_is_named_escaped(api: Client) -> None:
    task_id = await created(api)

    answer = await api.post(f"/tasks/{task_id}/pause", content=b'{"\\ud800": 1}', headers=JSON)

    assert fields_of(answer) == ["\\ud800"]
    assert (await api.get(f"/tasks/{task_id}")).json()["enabled"] is True


async def test_an_interval_of_hundreds_of_digits_is_refused(api: Client) -> None:
    every = "1" + "0" * 400
    body = f'{{"trigger": {{"kind": "interval", "every": {every}}}}}'

    answer = await api.post("/triggers/preview", content=body, headers=JSON)

    assert "a number of about 401 digits" in assert_problem(answer, 422)["errors"][0]["message"]


# A digit Python reads (in Latin-1, as a header's bytes are) that int() does not.
@pytest.mark.parametrize("tag", [b'"' + b"9" * 5000 + b'"', b'"\xb2"'])
async def test_an_if_match_naming_no_version_issued_is_a_412(api: Client, tag: bytes) -> None:
    task_id = await created(api)

    answer = await api.patch(
        f"/tasks/{task_id}", json={"description": "x"}, headers={b"If-Match": tag}
    )

    assert_problem(answer, 412)
    assert (await api.get(f"/tasks/{task_id}")).json()["version"] == 1


async def test_a_number_of_thousands_of_digits_says_so_in_its_own_words(api: Client) -> None:
    task_id = await created(api)

    answer = await api.patch(
        f"/tasks/{task_id}", content='{"description": ' + "9" * 5000 + "}", headers=PATCH
    )

    detail = assert_problem(answer, 400)["detail"]
    assert detail.endswith("a number has more than 4,300 digits")


async def test_an_icalendar_event_past_the_last_date_there_is_is_refused(api: Client) -> None:
    await api.post("/calendars", json={"name": "office"})
    body = (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//p//p//EN\r\nBEGIN:VEVENT\r\nUID:u1\r\n"
        "SUMMARY:Last\r\nDTSTART;VALUE=DATE:99991231\r\nRRULE:FREQ=DAILY;COUNT=2\r\n"
        "END:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    headers = {"Content-Type": "text/calendar"}

    answer = await api.post("/calendars/office/import", content=body, headers=headers)
    # The last day alone is a date like any other.
    alone = body.replace("RRULE:FREQ=DAILY;COUNT=2\r\n", "")
    held = await api.post("/calendars/office/import", content=alone, headers=headers)

    assert fields_of(answer) == ["body"]
    assert (
        "event Last: RRULE:FREQ=DAILY;COUNT=2 runs past 9999-12-31"
        in (answer.json()["errors"][0]["message"])
    )
    assert held.status_code == 200, held.text
    assert (await api.get("/calendars/office")).json()["dates"] == ["9999-12-31"]


async def test_a_target_host_the_http_client_cannot_encode_is_refused(api: Client) -> None:
    answer = await api.post("/tasks", json=cron_task("http://xn--/"))

    assert fields_of(answer) == ["target.url"]
    assert (await api.get("/tasks")).json()["items"] == []


@pytest.mark.parametrize("url", [" http://127.0.0.1:9/", "http://127.0.0.1:9/ "])
async def test_a_target_url_with_white_space_around_it_is_refused(api: Client, url: str) -> None:
    # urlsplit reads past it, but the HTTP client would call a relative URL every time.
    answer = await api.post("/tasks", json=cron_task(url))

    assert fields_of(answer) == ["target.url"]
    assert "white space" in answer.json()["errors"][0]["message"]
    assert (await api.get("/tasks")).json()["items"] == []


async def test_a_forged_cursor_holding_a_lone_surrogate_is_refused(api: Client) -> None:
    data = b'{"list": "calendars", "after": "\\ud800"}'
    check = hashlib.blake2b(data, key=CURSOR_KEY, digest_size=12).digest()
    cursor = ".".join(base64.urlsafe_b64encode(p).decode().rstrip("=") for p in (data, check))

    answer = await api.get("/calendars", params={"cursor": cursor})

    assert fields_of(answer) == ["cursor"]
