"""The console over HTTP on the in-memory store (fast): access, CSRF, headers, paging,
filters and escaping, as a browser would meet them."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from entrypoints.container import build_container
from entrypoints.http.app import create_app
from tests.entrypoints.helpers import cron_task, make_settings

WRITER, READER = "writer-token", "reader-token"
Client = AsyncTestClient[Any]


async def _client(tokens: str) -> AsyncIterator[Client]:
    app = create_app(build_container(make_settings(api_tokens=tokens)))
    async with AsyncTestClient(app=app) as client:
        yield client


@pytest.fixture
async def open_console() -> AsyncIterator[Client]:
    """No tokens configured: the console needs no login."""
    async for client in _client(""):
        yield client


@pytest.fixture
async def guarded() -> AsyncIterator[Client]:
    async for client in _client(f"{WRITER},{READER}:read"):
        yield client


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


async def submit_login(client: Client, token: str, **request: Any) -> Any:
    """Fill in the login form as a browser does: fetch it, then post it with its token."""
    form = await client.get("/ui/login")
    data = {"token": token, "csrf_token": csrf_of(form.text)}
    return await client.post("/ui/login", data=data, follow_redirects=False, **request)


async def log_in(client: Client, token: str) -> None:
    response = await submit_login(client, token)
    assert response.status_code == 303, response.text


async def create(client: Client, body: dict[str, Any], token: str | None = WRITER) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = await client.post("/tasks", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()


async def test_every_answer_carries_the_security_headers(open_console: Client) -> None:
    for path in ("/ui/", "/ui/static/console.css", "/ui/static/console.js", "/ui/login"):
        response = await open_console.get(path)
        assert response.status_code == 200, path
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp, path
        assert "unsafe-inline" not in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "same-origin"
        assert re.fullmatch(r"app;dur=\d+\.\d", response.headers["server-timing"])
    page = await open_console.get("/ui/")
    assert page.headers["cache-control"] == "no-store"
    assert "<script>" not in page.text and " style=" not in page.text  # nothing inline


async def test_the_footer_links_an_api_reference_that_reads_offline(open_console: Client) -> None:
    """`/schema` is Swagger UI, which the browser loads from a CDN (blank offline, as an
    audit found): the footer links the OpenAPI document too, and says where the other
    comes from."""
    page = await open_console.get("/ui/")
    footer = page.text[page.text.index("<footer>") : page.text.index("</footer>")]
    assert 'href="/schema/openapi.json"' in footer and "cdn.jsdelivr.net" in footer
    document = await open_console.get("/schema/openapi.json")
    assert document.status_code == 200 and document.json()["openapi"].startswith("3.1")


async def test_without_tokens_a_mutation_needs_the_csrf_token_of_its_session(
    open_console: Client,
) -> None:
    await create(open_console, cron_task("http://127.0.0.1:9/"), token=None)
    page = await open_console.get("/ui/tasks/nightly-report")
    token = csrf_of(page.text)
    refused = await open_console.post("/ui/tasks/nightly-report/pause", data={})
    assert refused.status_code == 403
    assert "CSRF" in refused.text
    forged = await open_console.post(
        "/ui/tasks/nightly-report/pause", data={"csrf_token": "0" * 64}
    )
    assert forged.status_code == 403
    assert (await open_console.get("/tasks/nightly-report")).json()["enabled"] is True
    done = await open_console.post(
        "/ui/tasks/nightly-report/pause", data={"csrf_token": token}, follow_redirects=False
    )
    assert done.status_code == 303
    assert done.headers["location"] == "/ui/tasks/nightly-report?done=paused"
    assert (await open_console.get("/tasks/nightly-report")).json()["enabled"] is False
    paused_words = "Paused: the task will not fire until it is resumed."
    assert paused_words in (await open_console.get(done.headers["location"])).text
    # The same link once the task is resumed (kept, shared) no longer says it.
    await open_console.post("/tasks/nightly-report/resume")
    assert paused_words not in (await open_console.get(done.headers["location"])).text


async def test_a_csrf_token_belongs_to_one_session(guarded: Client) -> None:
    await create(guarded, cron_task("http://127.0.0.1:9/"))
    await log_in(guarded, WRITER)
    writer_csrf = csrf_of((await guarded.get("/ui/")).text)
    guarded.cookies.clear()
    await log_in(guarded, f"{WRITER}")  # the same token gives the same session
    assert csrf_of((await guarded.get("/ui/")).text) == writer_csrf
    async for other in _client(f"{WRITER},second-writer"):
        await create(other, cron_task("http://127.0.0.1:9/"))
        await log_in(other, "second-writer")
        answer = await other.post(
            "/ui/tasks/nightly-report/pause", data={"csrf_token": writer_csrf}
        )
        assert answer.status_code == 403


async def test_logging_in_leads_back_to_the_page_asked_for(guarded: Client) -> None:
    # A link from an alert, opened without a session, is where the login leads.
    await create(guarded, cron_task("http://127.0.0.1:9/"))
    asked = await guarded.get("/ui/runs?status=failed&task=nightly-report", follow_redirects=False)
    login_page = asked.headers["location"]
    assert login_page == "/ui/login?next=%2Fui%2Fruns%3Fstatus%3Dfailed%26task%3Dnightly-report"
    form = await guarded.get(login_page)
    assert 'name="next" value="/ui/runs?status=failed&amp;task=nightly-report"' in form.text
    data = {"token": WRITER, "csrf_token": csrf_of(form.text), "next": "/ui/runs?status=failed"}
    logged_in = await guarded.post("/ui/login", data=data, follow_redirects=False)
    assert logged_in.headers["location"] == "/ui/runs?status=failed"
    # Never to another site, nor back to the login page.
    guarded.cookies.clear()
    for elsewhere in (
        "https://evil.example/",
        "//evil.example/ui/",
        "/ui/login",
        "/api",
        "/ui\\x",
        "/ui/../schema",
        "/ui/%2E%2e/schema?x=1",
        "/ui/tasks/./../../api",
    ):
        form = await guarded.get("/ui/login", params={"next": elsewhere})
        assert 'name="next"' not in form.text
        data = {"token": WRITER, "csrf_token": csrf_of(form.text), "next": elsewhere}
        answer = await guarded.post("/ui/login", data=data, follow_redirects=False)
        assert answer.headers["location"] == "/ui/"
        guarded.cookies.clear()


async def test_a_form_posted_after_the_session_ended_says_it_was_not_done(
    guarded: Client,
) -> None:
    await create(guarded, cron_task("http://127.0.0.1:9/"))
    await log_in(guarded, WRITER)
    page = await guarded.get("/ui/tasks/nightly-report")
    guarded.cookies.delete("imbi_console")
    pause = await guarded.post(
        "/ui/tasks/nightly-report/pause",
        data={"csrf_token": csrf_of(page.text)},
        headers={"Referer": "http://testserver/ui/tasks/nightly-report"},
        follow_redirects=False,
    )
    assert pause.headers["location"] == "/ui/login?next=%2Fui%2Ftasks%2Fnightly-report&lost=1"
    said = (await guarded.get(pause.headers["location"])).text
    assert "Your session had ended, so what you asked was not done" in said
    bearer = {"Authorization": f"Bearer {WRITER}"}
    task = await guarded.get("/tasks/nightly-report", headers=bearer)
    assert task.json()["enabled"] is True


async def test_with_tokens_the_console_asks_for_one(guarded: Client) -> None:
    answer = await guarded.get("/ui/tasks", follow_redirects=False)
    assert (
        answer.status_code == 303 and answer.headers["location"] == "/ui/login?next=%2Fui%2Ftasks"
    )
    wrong = await submit_login(guarded, "guess")
    assert wrong.status_code == 401
    assert "not configured" in wrong.text
    login = await submit_login(guarded, WRITER)
    cookie = login.headers["set-cookie"]
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
    assert "Secure" not in cookie and "Path=/ui" in cookie
    assert (await guarded.get("/ui/")).status_code == 200
    logout = await guarded.post(
        "/ui/logout",
        data={"csrf_token": csrf_of((await guarded.get("/ui/")).text)},
        follow_redirects=False,
    )
    assert logout.status_code == 303
    assert "Max-Age=0" in logout.headers["set-cookie"]
    guarded.cookies.clear()
    landed = await guarded.get(logout.headers["location"])
    assert '<p class="notice" role="status">You have logged out' in landed.text
    assert (await guarded.get("/ui/", follow_redirects=False)).status_code == 303


async def test_behind_https_the_cookie_is_secure(guarded: Client) -> None:
    login = await submit_login(guarded, WRITER, headers={"X-Forwarded-Proto": "https"})
    assert "Secure" in login.headers["set-cookie"]


async def test_a_read_only_token_sees_no_buttons_and_its_mutation_is_403(
    guarded: Client,
) -> None:
    await create(guarded, cron_task("http://127.0.0.1:9/"))
    await log_in(guarded, READER)
    page = await guarded.get("/ui/tasks/nightly-report")
    assert page.status_code == 200
    assert "Run now" not in page.text and ">Pause<" not in page.text
    assert "Dry run" in page.text  # changes nothing, so a reader may
    answer = await guarded.post(
        "/ui/tasks/nightly-report/run", data={"csrf_token": csrf_of(page.text)}
    )
    assert answer.status_code == 403
    assert "read-only" in answer.text
    runs = await guarded.get(
        "/tasks/nightly-report/runs", headers={"Authorization": f"Bearer {READER}"}
    )
    assert runs.json()["items"] == []
    dry = await guarded.get("/ui/tasks/nightly-report/dry-run")
    assert dry.status_code == 200
    assert "POST http://127.0.0.1:9/" in dry.text


async def test_names_descriptions_tags_and_headers_are_escaped(open_console: Client) -> None:
    body = cron_task(
        "http://127.0.0.1:9/",
        description='<script>alert("x")</script>',
        target={"url": "http://127.0.0.1:9/", "headers": {"X-Note": "<b>&amp;</b>"}},
    )
    await create(open_console, body, token=None)
    page = (await open_console.get("/ui/tasks/nightly-report")).text
    assert '<script>alert("x")</script>' not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page
    assert "<b>&amp;</b>" not in page and "&lt;b&gt;&amp;amp;&lt;/b&gt;" in page


async def test_the_tasks_page_pages_and_filters(open_console: Client) -> None:
    for index in range(55):
        tags = ["even"] if index % 2 == 0 else ["odd"]
        body = cron_task("http://127.0.0.1:9/", name=f"job-{index:02d}", tags=tags)
        await create(open_console, {**body, "enabled": index != 3}, token=None)
    first = (await open_console.get("/ui/")).text
    assert first.count('<th scope="row"') == 50
    cursor = re.search(r'rel="next" href="/ui/\?cursor=([^"]+)"', first)
    assert cursor
    second = (await open_console.get(f"/ui/?cursor={cursor.group(1)}")).text
    # Tasks made in the same second are ordered by id: compare the sets of names.
    names = [set(re.findall(r">(job-\d\d)</a>", page)) for page in (first, second)]
    assert len(names[1]) == 5 and not names[0] & names[1]
    assert names[0] | names[1] == {f"job-{index:02d}" for index in range(55)}
    assert 'rel="next"' not in second
    odd = (await open_console.get("/ui/?tag=odd&name=job-1")).text
    assert odd.count('<th scope="row"') == 5  # job-11, 13, 15, 17, 19
    paused = (await open_console.get("/ui/?state=paused")).text
    assert paused.count('<th scope="row"') == 1 and "job-03" in paused
    none = (await open_console.get("/ui/?name=nothing")).text
    assert "No task matches these filters." in none


async def test_unknown_things_are_pages_not_json(open_console: Client) -> None:
    for path in (
        "/ui/tasks/missing",
        "/ui/runs/not-a-uuid",
        f"/ui/runs/{'0' * 8}-0000-0000-0000-{'0' * 12}",
    ):
        answer = await open_console.get(path)
        assert answer.status_code == 404, path
        assert answer.headers["content-type"].startswith("text/html")
    bad = await open_console.get("/ui/?cursor=garbage")
    assert bad.status_code == 422 and "cursor" in bad.text


async def test_the_runs_page_lists_every_tasks_runs_with_the_filters_of_get_runs(
    open_console: Client,
) -> None:
    first = await create(open_console, cron_task("http://127.0.0.1:9/", name="first"), None)
    second = await create(open_console, cron_task("http://127.0.0.1:9/", name="second"), None)
    gone = await create(open_console, cron_task("http://127.0.0.1:9/", name="gone"), None)
    for task in (first, second, second, gone):
        assert (await open_console.post(f"/tasks/{task['id']}/runs")).status_code == 202
    await open_console.delete(f"/tasks/{gone['id']}")
    every = (await open_console.get("/ui/runs")).text
    assert every.count('<th scope="row"') == 4
    assert ">first</a>" in every and ">second</a>" in every and "(deleted task)" in every
    only = (await open_console.get("/ui/runs?task=second")).text
    assert only.count('<th scope="row"') == 2 and ">first</a>" not in only
    assert "No run matches these filters." in (await open_console.get("/ui/runs?tag=none")).text
    later = (await open_console.get("/ui/runs?since=2999-01-01T00:00")).text
    assert later.count('<th scope="row"') == 0
    bad = await open_console.get("/ui/runs?since=yesterday&until=2026-01-01T00:00")
    assert bad.status_code == 422
    # The words name what was typed (a date-time input cannot show "yesterday"), and
    # the input points at them; the good filter is kept.
    assert (
        '<li id="filter-since-error"><code>since</code> must be a date and time like'
        " 2026-03-08T02:30 (got &#39;yesterday&#39;)</li>" in bad.text
    )
    assert 'aria-invalid="true" aria-describedby="filter-since-error"' in bad.text
    assert 'value="2026-01-01T00:00">' in bad.text  # until: not marked, kept


async def test_a_change_from_the_console_is_in_the_history_under_the_tokens_label() -> None:
    async for client in _client(f"alice={WRITER},{READER}:read"):
        await create(client, cron_task("http://127.0.0.1:9/"))
        await log_in(client, WRITER)
        page = await client.get("/ui/tasks/nightly-report")
        await client.post("/ui/tasks/nightly-report/pause", data={"csrf_token": csrf_of(page.text)})
        history = await client.get(
            "/tasks/nightly-report/history", headers={"Authorization": f"Bearer {WRITER}"}
        )
        newest = history.json()["items"][0]
        assert newest["actor"] == "alice" and newest["changes"]["enabled"] == [True, False]
        shown = (await client.get("/ui/tasks/nightly-report")).text
        history_part = shown[shown.index('id="history-h"') : shown.index('id="definition-h"')]
        assert "alice" in history_part and "<code>enabled</code>" in history_part
        assert "<code>true</code> → <code>false</code>" in history_part


async def test_guessing_tokens_at_the_login_form_is_limited_like_the_api() -> None:
    settings = make_settings(api_tokens=WRITER, auth_failure_limit=2, auth_failure_window=60)
    async with AsyncTestClient(app=create_app(build_container(settings))) as client:
        for _ in range(3):  # an empty form guesses nothing: never counted
            empty = await submit_login(client, "  ")
            assert empty.status_code == 401 and "Enter an API token." in empty.text
        for _ in range(2):
            assert (await submit_login(client, "guess")).status_code == 401
        refused = await submit_login(client, WRITER)
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 0
        assert "set-cookie" not in refused.headers
        api = await client.get("/tasks", headers={"Authorization": f"Bearer {WRITER}"})
        assert api.status_code == 429  # one count for the form and the API


async def test_the_task_page_names_what_each_fire_time_went_through(open_console: Client) -> None:
    # Monthly from January 31 (of a year far ahead, so that the first ten fire times are
    # those, whenever the test runs): a month without a 31st clamps to its last day.
    trigger = {"kind": "calendar", "months": 1, "hour": 9, "start_date": "2099-01-31"}
    await create(
        open_console,
        {"name": "month-end", "trigger": trigger, "target": {"url": "http://127.0.0.1:9/"}},
        token=None,
    )
    page = await open_console.get("/ui/tasks/month-end")
    assert page.status_code == 200
    listed = re.findall(r"<li>(.*?)</li>", page.text.split('class="fire-times"')[1])
    flagged = {item[16:26]: "month clamped" in item for item in listed}
    assert flagged["2099-02-28"] and flagged["2099-04-30"], listed
    assert not flagged["2099-01-31"] and not flagged["2099-03-31"], listed


async def test_a_login_form_without_the_token_of_its_browser_is_refused(guarded: Client) -> None:
    # Another site posting a token of its choosing: no login cookie, or another one's.
    forged = await guarded.post("/ui/login", data={"token": WRITER}, follow_redirects=False)
    assert forged.status_code == 403 and "expired" in forged.text
    assert "imbi_console=" not in forged.headers.get("set-cookie", "")
    other = await guarded.post(
        "/ui/login", data={"token": WRITER, "csrf_token": "0" * 64}, follow_redirects=False
    )
    assert other.status_code == 403
    assert (await guarded.get("/ui/", follow_redirects=False)).status_code == 303
    assert (await submit_login(guarded, WRITER)).status_code == 303
