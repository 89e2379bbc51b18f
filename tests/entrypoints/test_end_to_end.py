"""The real server (`imbi-scheduler serve` in a subprocess) over real HTTP, on the
in-memory store and on PostgreSQL, calling a real recording target."""

from __future__ import annotations

import functools
import signal
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from httpx import AsyncClient

from tests.entrypoints.live import LiveServer
from tests.fixtures.target import RecordingTarget, Response
from tests.fixtures.waiting import eventually

ADMIN, VIEWER = "e2e-admin-token", "e2e-viewer-token"
TOKENS = f"{ADMIN},{VIEWER}:read"
# Far beyond every wait below (eventually's deadline, WAIT, is 30 s): a task that fires
# within one was woken, not polled.
LONG_POLL = {"SCHEDULER_MAX_POLL_INTERVAL": "120"}


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_environ(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The store variables of a server: none (memory), or the session database with a
    schema of this test's own, dropped afterwards."""
    if request.param == "memory":
        yield {}
        return
    url: str = request.getfixturevalue("database_url")
    schema: str = request.getfixturevalue("fresh_schema")
    yield {"SCHEDULER_DATABASE_URL": url, "SCHEDULER_SCHEMA": schema}


@pytest.fixture
def server(store_environ: dict[str, str]) -> Iterator[LiveServer]:
    with LiveServer({**store_environ, **LONG_POLL, "SCHEDULER_API_TOKENS": TOKENS}) as live:
        yield live


@pytest.fixture
async def api(server: LiveServer) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10
    ) as client:
        yield client


def utc(instant: datetime) -> str:
    return instant.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


async def create(api: AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    response = await api.post("/tasks", json=body)
    assert response.status_code == 201, response.text
    task: dict[str, Any] = response.json()
    return task


async def runs_of(api: AsyncClient, task: dict[str, Any], *, status: str) -> list[dict[str, Any]]:
    response = await api.get(f"/tasks/{task['id']}/runs", params={"status": status})
    runs: list[dict[str, Any]] = response.json()["items"]
    return runs


async def test_tasks_of_all_four_kinds_fire_on_schedule(
    api: AsyncClient, recording_target: RecordingTarget
) -> None:
    now = datetime.now(timezone.utc).replace(microsecond=0)
    # Seconds ahead, with room for the four creates on a busy machine: a fire time that
    # passed before its task was made would be tomorrow's (or a one-shot's, missed).
    soon = now + timedelta(seconds=8)
    # Daily at a wall-clock second in London (six fields, seconds first): ten seconds on.
    london = (now + timedelta(seconds=10)).astimezone(ZoneInfo("Europe/London"))
    daily = f"{london.second} {london.minute} {london.hour} * * *"
    bodies = {
        "interval": {"kind": "interval", "every": "PT1H"},
        "one-shot": {"kind": "one_shot", "run_at": utc(now + timedelta(seconds=6))},
        "calendar": {
            "kind": "calendar",
            "days": 1,
            "hour": soon.hour,
            "minute": soon.minute,
            "second": soon.second,
            "start_date": soon.date().isoformat(),
        },
        # Both instants of a wall time that exists twice: on the night London's clocks go
        # back, four seconds on may be the second one (the default fires the first only).
        "cron": {
            "kind": "cron",
            "expression": daily,
            "timezone": "Europe/London",
            "dst": {"fold": "both"},
        },
    }
    tasks = {
        kind: await create(
            api,
            {"name": kind, "trigger": trigger, "target": {"url": recording_target.url(f"/{kind}")}},
        )
        for kind, trigger in bodies.items()
    }

    for kind, task in tasks.items():
        succeeded = await eventually(
            functools.partial(runs_of, api, task, status="succeeded"), within=20
        )
        assert len(succeeded) == 1, kind
        assert len(recording_target.received(f"/{kind}")) == 1, kind
    scheduled = {
        kind: (await runs_of(api, task, status="succeeded"))[0]["scheduled_for"]
        for kind, task in tasks.items()
    }
    assert scheduled == {
        "interval": tasks["interval"]["created_at"],  # no start_at: it fires at once
        "one-shot": utc(now + timedelta(seconds=6)),
        "calendar": utc(soon),
        "cron": utc(london),
    }
    assert scheduled == {kind: task["next_run_at"] for kind, task in tasks.items()}
    one_shot = (await api.get("/tasks/one-shot")).json()
    assert one_shot["enabled"] is True and one_shot["next_run_at"] is None


async def test_a_task_created_due_fires_without_waiting_for_the_poll(
    api: AsyncClient, recording_target: RecordingTarget
) -> None:
    await create(
        api,
        {
            "name": "due",
            "trigger": {"kind": "interval", "every": 3600},
            "target": {"url": recording_target.url("/due")},
        },
    )

    # Within eventually's deadline, well before the engine's next poll: the create woke it.
    await eventually(lambda: _received(recording_target, "/due"), "the call of the due task")


async def test_a_patch_that_makes_a_task_due_wakes_the_engine(
    api: AsyncClient, recording_target: RecordingTarget
) -> None:
    yearly = {"kind": "cron", "expression": "0 0 1 1 *"}
    target = {"url": recording_target.url("/patched")}
    await create(api, {"name": "patched", "trigger": yearly, "target": target})

    # A new trigger takes effect at once: an interval without start_at is due now.
    patch = {"trigger": {"kind": "interval", "every": 3600}}
    assert (await api.patch("/tasks/patched", json=patch)).status_code == 200

    # Before the engine's next poll (LONG_POLL): the patch woke it.
    await eventually(lambda: _received(recording_target, "/patched"), "the patched task's call")


async def _received(target: RecordingTarget, path: str) -> bool:
    return bool(target.received(path))


async def test_fire_now_reads_back_in_history_with_the_outbound_headers(
    api: AsyncClient, recording_target: RecordingTarget
) -> None:
    task = await create(
        api,
        {
            "name": "manual",
            "enabled": False,
            "trigger": {"kind": "cron", "expression": "0 0 1 1 *"},
            "target": {"url": recording_target.url("/manual"), "body": {"hello": "world"}},
        },
    )

    fired = await api.post("/tasks/manual/runs")

    assert fired.status_code == 202
    run = fired.json()
    done = await eventually(lambda: runs_of(api, task, status="succeeded"))
    assert [r["id"] for r in done] == [run["id"]]
    assert done[0]["manual"] is True and done[0]["http_status"] == 200
    assert (await api.get(f"/runs/{run['id']}")).json()["status"] == "succeeded"
    call = recording_target.received("/manual")[0]
    assert call.json() == {"hello": "world"}
    assert call.header("Idempotency-Key") == f"{task['id']}:{run['id']}"
    assert call.header("X-Scheduler-Task-Id") == task["id"]
    assert call.header(
        "User-Agent",
    ).startswith("imbi-scheduler/")  # type: ignore[union-attr]


async def test_error_paths_over_http(
    api: AsyncClient, server: LiveServer, recording_target: RecordingTarget
) -> None:
    def task(**fields: Any) -> dict[str, Any]:
        body = {
            "name": "e",
            "trigger": {"kind": "cron", "expression": "0 * * * *"},
            "target": {"url": recording_target.url()},
        }
        return {**body, **fields}

    cases = [
        (
            await api.post(
                "/tasks", json=task(trigger={"kind": "cron", "expression": "0 25 * * *"})
            ),
            422,
            ["trigger.expression"],
        ),
        (
            await api.post(
                "/tasks",
                json=task(
                    trigger={"kind": "cron", "expression": "0 * * * *", "timezone": "Nowhere/Land"}
                ),
            ),
            422,
            ["trigger.timezone"],
        ),
        (await api.post("/tasks", json=task(retries=3)), 422, ["retries"]),
        (await api.get("/tasks", params={"limit": 0}), 422, ["limit"]),
    ]
    for response, status, fields in cases:
        assert response.status_code == status, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert [e["field"] for e in response.json()["errors"]] == fields
    assert (await api.get("/tasks")).json()["items"] == []

    assert (await api.post("/tasks", json=task())).status_code == 201
    assert (await api.post("/tasks", json=task())).status_code == 409
    assert (
        await api.patch("/tasks/e", json={"jitter_seconds": 1}, headers={"If-Match": '"1"'})
    ).status_code == 200
    assert (
        await api.patch("/tasks/e", json={"jitter_seconds": 2}, headers={"If-Match": '"1"'})
    ).status_code == 412
    assert (await api.get("/tasks/missing")).status_code == 404

    async with AsyncClient(base_url=server.url) as anonymous:
        assert (await anonymous.get("/tasks")).status_code == 401
        assert (await anonymous.get("/healthz")).status_code == 200
    async with AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {VIEWER}"}
    ) as viewer:
        assert (await viewer.get("/tasks/e")).status_code == 200
        assert (await viewer.post("/tasks/e/pause")).status_code == 403
    assert (await api.get("/tasks/e")).json()["enabled"] is True


async def test_an_api_only_replica_serves_and_fires_manual_runs(
    recording_target: RecordingTarget,
) -> None:
    with LiveServer(LONG_POLL, ["--no-engine"]) as server:
        async with AsyncClient(base_url=server.url, timeout=10) as api:
            ready = (await api.get("/readyz")).json()
            task = await create(
                api,
                {
                    "name": "api-only",
                    "trigger": {"kind": "interval", "every": 3600},
                    "target": {"url": recording_target.url("/api-only")},
                },
            )
            await api.post("/tasks/api-only/runs")
            runs = await eventually(lambda: runs_of(api, task, status="succeeded"))

    assert ready == {"status": "ready", "checks": {"store": "ok"}}
    # Due at once, but no engine claims it: the one call is the manual run.
    assert [run["manual"] for run in runs] == [True]
    assert len(recording_target.received("/api-only")) == 1


# Every route of the endpoint table in docs/api.md ("Endpoints").
API_MD_ROUTES = {
    ("post", "/tasks"), ("get", "/tasks"), ("get", "/tasks/{id}"), ("patch", "/tasks/{id}"),
    ("delete", "/tasks/{id}"), ("post", "/tasks/{id}/pause"), ("post", "/tasks/{id}/resume"),
    ("post", "/tasks/{id}/dry-run"), ("post", "/tasks/{id}/runs"), ("get", "/tasks/{id}/runs"),
    ("get", "/runs"), ("get", "/runs/{id}"), ("post", "/runs/{id}/cancel"), ("get", "/events"),
    ("get", "/tasks/{id}/upcoming"), ("get", "/tasks/{id}/history"), ("put", "/tasks/{id}"),
    ("get", "/tasks/{id}/explain"),
    ("post", "/tasks/apply"), ("post", "/tasks/{id}/backfill"), ("get", "/backfills/{id}"),
    ("post", "/backfills/{id}/cancel"),
    ("post", "/triggers/preview"), ("get", "/healthz"), ("get", "/readyz"), ("get", "/metrics"),
    ("post", "/calendars"), ("get", "/calendars"), ("get", "/calendars/{name}"),
    ("put", "/calendars/{name}"), ("patch", "/calendars/{name}"), ("delete", "/calendars/{name}"),
    ("post", "/calendars/{name}/import"), ("get", "/calendars/{name}/tasks"),
}  # fmt: skip
OPEN_ROUTES = {"/healthz", "/readyz", "/metrics"}


async def test_the_openapi_document_is_3_1_complete_and_self_consistent(server: LiveServer) -> None:
    async with AsyncClient(base_url=server.url) as client:
        response = await client.get("/schema/openapi.json")
        docs = await client.get("/schema")

    assert response.status_code == 200 and docs.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.1")
    assert {"title", "version"} <= set(document["info"])
    routes = {(method, path) for path, item in document["paths"].items() for method in item}
    assert routes == API_MD_ROUTES
    schemes = document["components"]["securitySchemes"]
    assert schemes["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schemes["bearer"]["description"],
    }
    for method, path in API_MD_ROUTES:
        operation = document["paths"][path][method]
        codes = set(operation["responses"])
        assert any(code.startswith("2") for code in codes), (method, path)
        if path in OPEN_ROUTES:
            assert operation["security"] == []
            continue
        assert operation["security"] == [{"bearer": []}]
        assert {"401", "500"} <= codes
        for code in codes - {"200", "201", "202", "204"}:
            content = operation["responses"][code]["content"]
            assert list(content) == ["application/problem+json"], (method, path, code)
    assert set(document["paths"]["/tasks"]["post"]["responses"]) >= {"201", "409", "422"}
    assert "412" in document["paths"]["/tasks/{id}"]["patch"]["responses"]
    assert (
        "application/merge-patch+json"
        in document["paths"]["/tasks/{id}"]["patch"]["requestBody"]["content"]
    )
    schemas = document["components"]["schemas"]
    task_spec = schemas["TaskSpec"]
    assert task_spec["additionalProperties"] is False
    assert task_spec["properties"]["trigger"]["discriminator"]["propertyName"] == "kind"
    assert "next_fire_at" not in schemas["TaskResource"]["properties"]
    assert unresolved_refs(document) == set()


def unresolved_refs(document: dict[str, Any]) -> set[str]:
    names = set(document["components"]["schemas"])
    refs: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref":
                    refs.add(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)
    return {ref for ref in refs if ref.removeprefix("#/components/schemas/") not in names}


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
async def test_a_stop_signal_drains_runs_in_flight_and_exits_cleanly(
    store_environ: dict[str, str], recording_target: RecordingTarget, stop_signal: signal.Signals
) -> None:
    # SIGHUP as SIGTERM: a closed terminal or a supervisor must not kill runs outright.
    recording_target.respond("/slow", Response(delay=1.5))
    with LiveServer({**store_environ, **LONG_POLL}) as server:
        async with AsyncClient(base_url=server.url, timeout=10) as api:
            slow = {"url": recording_target.url("/slow")}
            interval = {"kind": "interval", "every": 3600}
            task = await create(api, {"name": "slow", "trigger": interval, "target": slow})
            await eventually(lambda: _received(recording_target, "/slow"))

        assert server.stop(stop_signal) == 0, server.log()

        assert "stopped" in server.log()
    if store_environ:  # PostgreSQL keeps the run: it finished before the process did
        with LiveServer(store_environ) as restarted:
            async with AsyncClient(base_url=restarted.url) as api:
                runs = (await api.get(f"/tasks/{task['id']}/runs")).json()["items"]
        assert [run["status"] for run in runs] == ["succeeded"]
