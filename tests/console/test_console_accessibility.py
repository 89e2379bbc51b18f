"""axe-core (bundled with axe-playwright-python, nothing downloaded) on every page."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.console.conftest import log_in
from tests.fixtures.target import RecordingTarget, Response

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
SERIOUS = {"serious", "critical"}


def serious_violations(page: Any) -> list[str]:
    # The package ships no type hints (no py.typed, no stubs): Axe is Any here.
    from axe_playwright_python.sync_playwright import Axe  # type: ignore[import-untyped]

    results = Axe().run(page)
    return [
        f"{violation['id']} ({violation['impact']}): {violation['help']} — "
        + "; ".join(node["target"][0] for node in violation["nodes"][:3])
        for violation in results.response["violations"]
        if violation["impact"] in SERIOUS
    ]


@pytest.fixture(scope="module")
def subjects(api: httpx.Client, target: RecordingTarget) -> dict[str, str]:
    """A task with a succeeded and a failed run, and the paths of every page."""
    name = f"axe-{uuid.uuid4().hex[:8]}"
    target.respond(f"/{name}", Response(200, b"fine"), Response(500, b"broken"))
    calendar = {"name": name, "description": "Closed", "dates": ["2030-12-24", "2031-01-02"]}
    assert api.post("/calendars", json={**calendar, "weekdays": ["SUN"]}).status_code == 201
    task = api.post(
        "/tasks",
        json={
            "name": name,
            "description": "Checked by axe",
            "tags": ["nightly"],
            "trigger": {"kind": "interval", "every": 900, "calendar": {"name": name}},
            "target": {"url": target.url(f"/{name}")},
            "notify": {"url": target.url(f"/{name}-events")},  # for the events page
        },
    ).json()
    runs = [api.post(f"/tasks/{task['id']}/runs").json() for _ in range(2)]
    return {
        "tasks": "/ui/",
        "task": f"/ui/tasks/{name}",
        "run": f"/ui/runs/{runs[0]['id']}",
        "runs": "/ui/runs",
        "calendars": "/ui/calendars",
        "calendar": f"/ui/calendars/{name}",
        "events": "/ui/events",
        "events, refused": "/ui/events?status=nosuch",
        "not found": "/ui/tasks/no-such-task",
        "explain": f"/ui/tasks/{name}/explain",
        "explain, refused": f"/ui/tasks/{name}/explain?at=yesterday",
        "runs, refused": "/ui/runs?since=yesterday&status=nosuch",
        "new task": "/ui/new-task",
        "edit": f"/ui/tasks/{name}/edit",
        "delete": f"/ui/tasks/{name}/delete",
    }


@pytest.mark.parametrize(
    "where",
    [
        "login",
        "tasks",
        "task",
        "run",
        "runs",
        "calendars",
        "calendar",
        "events",
        "events, refused",
        "not found",
        "explain",
        "explain, refused",
        "runs, refused",
        "new task",
        "edit",
        "delete",
    ],
)
def test_no_serious_accessibility_violation(
    where: str, new_page: Any, subjects: dict[str, str]
) -> None:
    page = new_page()
    if where == "login":
        page.goto("/ui/login")
    else:
        log_in(page)
        page.goto(subjects[where])
    assert serious_violations(page) == []


def test_no_serious_accessibility_violation_on_a_dry_run(
    new_page: Any, subjects: dict[str, str]
) -> None:
    page = new_page()
    log_in(page)
    page.goto(subjects["task"])
    page.get_by_role("link", name="Dry run").click()
    page.get_by_role("heading", name="Dry run").wait_for()
    assert serious_violations(page) == []


def test_no_serious_accessibility_violation_at_360_px(
    new_page: Any, subjects: dict[str, str]
) -> None:
    page = new_page(width=360, height=740)
    log_in(page)
    for where in ("tasks", "task"):
        page.goto(subjects[where])
        assert serious_violations(page) == [], where


def _luminance(rgb: str) -> float:
    """The relative luminance (WCAG) of a CSS `rgb(r, g, b)` colour."""
    channels = [int(part) / 255 for part in rgb[rgb.index("(") + 1 : -1].split(",")[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def test_the_keyboard_focus_ring_stands_out_from_the_page(
    new_page: Any, subjects: dict[str, str]
) -> None:
    # axe does not check a focus indicator's contrast; WCAG 1.4.11 asks 3:1.
    page = new_page()
    log_in(page)
    page.goto(subjects["task"])
    button = page.get_by_role("button", name="Run now")
    button.focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")  # focused from the keyboard: focus-visible
    ring, background = button.evaluate(
        "b => [getComputedStyle(b).outlineColor, getComputedStyle(document.body).backgroundColor]"
    )
    lighter, darker = sorted((_luminance(ring), _luminance(background)), reverse=True)
    assert (lighter + 0.05) / (darker + 0.05) >= 3, (ring, background)
