"""The web console (`/ui/`): server-rendered pages over the application's use cases."""

from __future__ import annotations

from collections.abc import Mapping

from litestar import Router
from litestar.di import Provide
from litestar.static_files import create_static_files_router

from entrypoints.http.auth import FailureLimiter, digest_grants
from entrypoints.http.console.access import check_csrf, session_guard
from entrypoints.http.console.actions import ConsoleActions, ConsoleLogin, LoginGate
from entrypoints.http.console.backfill_page import BackfillPreview
from entrypoints.http.console.calendar_pages import CalendarPages
from entrypoints.http.console.editing import TaskEditing, TaskEditorForms
from entrypoints.http.console.errors import CONSOLE_EXCEPTION_HANDLERS
from entrypoints.http.console.event_pages import EventPages
from entrypoints.http.console.explain_page import ExplainPage
from entrypoints.http.console.pages import ConsolePages
from entrypoints.http.console.rendering import STATIC_DIR, console_headers
from entrypoints.http.guards import in_turn
from entrypoints.http.nul import nul_guard
from entrypoints.settings import Access, Grant


def console_router(
    tokens: Mapping[str, Access | Grant], limiter: FailureLimiter | None = None
) -> Router:
    """Everything under /ui: the login page and static files for anyone, the pages and
    actions behind the session guard. `limiter` is the API's (failed logins count)."""
    gate = LoginGate(digest_grants(tokens), limiter or FailureLimiter(0, 0))

    def console_gate() -> LoginGate:
        return gate

    actions = Router(
        path="/", route_handlers=[ConsoleActions, TaskEditing], before_request=check_csrf
    )
    guarded = Router(
        path="/",
        route_handlers=[
            ConsolePages,
            ExplainPage,
            BackfillPreview,
            TaskEditorForms,
            CalendarPages,
            EventPages,
            actions,
        ],
        guards=[in_turn(session_guard(tokens), nul_guard)],
    )
    static = create_static_files_router(
        path="/static", directories=[STATIC_DIR], include_in_schema=False, name="console:static"
    )
    return Router(
        path="/ui",
        route_handlers=[ConsoleLogin, static, guarded],
        dependencies={"console_gate": Provide(console_gate, sync_to_thread=False)},
        exception_handlers=CONSOLE_EXCEPTION_HANDLERS,
        middleware=[console_headers],
        include_in_schema=False,
    )
