"""The console's buttons (forms posting here), and logging in and out.

Every action checks the form's CSRF token before anything else (`check_csrf`, the
`before_request` hook of their router), then calls the same use case as the API, then redirects
(post/redirect/get) to the page that shows the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode
from uuid import UUID

from litestar import Controller, Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, QueryParameter
from litestar.response import Redirect

from application.backfills import BackfillService
from application.scheduling import SchedulingService
from domain.errors import RunNotFound
from domain.overlap import CANCELLED_FROM_CONSOLE
from entrypoints.http.auth import MUTATION, FailureLimiter, actor_of, grant_of
from entrypoints.http.console.access import (
    CSRF_FIELD,
    csrf_token_of,
    current_session,
    login_cookie,
    login_csrf_ok,
    login_form_secret,
    return_path,
    session_cookie,
)
from entrypoints.http.console.backfill_page import (
    backfill_or_refusal,
    backfill_values,
    preview_path,
)
from entrypoints.http.console.rendering import render
from entrypoints.settings import Grant


def _task_page(name: str, done: str | None = None) -> Redirect:
    suffix = f"?done={done}" if done else ""
    return Redirect(f"/ui/tasks/{name}{suffix}", status_code=303)


class ConsoleActions(Controller):
    path = "/"

    @post("/tasks/{ref:str}/pause", name="console:pause", include_in_schema=False)
    async def pause(
        self,
        ref: FromPath[str],
        scheduling: NamedDependency[SchedulingService],
        request: Request[Any, Any, Any],
    ) -> Redirect:
        task = await scheduling.pause_task(ref, actor=actor_of(request))
        return _task_page(task.name, "paused")

    @post("/tasks/{ref:str}/resume", name="console:resume", include_in_schema=False)
    async def resume(
        self,
        ref: FromPath[str],
        scheduling: NamedDependency[SchedulingService],
        request: Request[Any, Any, Any],
    ) -> Redirect:
        task = await scheduling.resume_task(ref, actor=actor_of(request))
        return _task_page(task.name, "resumed")

    @post("/tasks/{ref:str}/run", name="console:run-now", include_in_schema=False)
    async def run_now(
        self, ref: FromPath[str], scheduling: NamedDependency[SchedulingService]
    ) -> Redirect:
        run = await scheduling.fire_now(ref)
        return Redirect(f"/ui/runs/{run.id}", status_code=303)

    @post("/tasks/{ref:str}/backfill", name="console:backfill", include_in_schema=False)
    async def backfill(
        self,
        request: Request[Any, Any, Any],
        ref: FromPath[str],
        backfills: NamedDependency[BackfillService],
        scheduling: NamedDependency[SchedulingService],
    ) -> Response[Any]:
        """The backfill form: the same use case as `POST /tasks/{id}/backfill`. A dry
        run is redirected to its page (`BackfillPreview`), a real one to its runs."""
        form = await request.form()
        dry_run = form.get("dry_run") == "on"
        values = backfill_values(form.get, dry_run=dry_run)
        if dry_run:
            return Redirect(preview_path(ref, values), status_code=303)
        answer = await backfill_or_refusal(
            request, ref, values, backfills, scheduling, actor_of(request)
        )
        if isinstance(answer, Response):
            return answer
        _, _, made = answer
        return Redirect(f"/ui/runs?backfill={made.backfill_id}", status_code=303)

    @post("/runs/{run_id:str}/cancel", name="console:cancel", include_in_schema=False)
    async def cancel(
        self, run_id: FromPath[str], scheduling: NamedDependency[SchedulingService]
    ) -> Redirect:
        try:
            run = await scheduling.cancel_run(UUID(run_id), CANCELLED_FROM_CONSOLE)
        except ValueError:
            raise RunNotFound(run_id) from None
        return Redirect(f"/ui/runs/{run.id}?done=cancel-requested", status_code=303)

    @post(
        "/backfills/{backfill_id:str}/cancel",
        name="console:cancel-backfill",
        include_in_schema=False,
    )
    async def cancel_backfill(
        self, backfill_id: FromPath[str], backfills: NamedDependency[BackfillService]
    ) -> Redirect:
        """The same use case as `POST /backfills/{id}/cancel`: its runs not yet started are
        cancelled; back to its runs, which say so."""
        cancelled = await backfills.cancel(backfill_id)
        query = urlencode({"backfill": backfill_id, "cancelled": cancelled})
        return Redirect(f"/ui/runs?{query}", status_code=303)

    @post("/logout", name="console:logout", opt={MUTATION: False}, include_in_schema=False)
    async def logout(self, request: Request[Any, Any, Any]) -> Redirect:
        redirect = Redirect("/ui/login?out=1", status_code=303)
        if not current_session(request).anonymous:
            redirect.set_cookie(session_cookie(request, "", clear=True))
        return redirect


class ConsoleLogin(Controller):
    """Reachable without a session (the rest of the console is not)."""

    path = "/login"

    @get("/", name="console:login", include_in_schema=False)
    async def form(
        self,
        request: Request[Any, Any, Any],
        console_gate: NamedDependency[LoginGate],
        next_page: Annotated[str | None, QueryParameter(name="next", max_length=2000)] = None,
        lost: Annotated[str | None, QueryParameter(max_length=1)] = None,
        out: Annotated[str | None, QueryParameter(max_length=1)] = None,
    ) -> Response[str]:
        # Without tokens there is nothing to log in with: the page says so.
        error = (
            "Your session had ended, so what you asked was not done: log in, then try again."
            if lost
            else None
        )
        return _login_page(
            request,
            200,
            error,
            tokens_configured=bool(console_gate.known),
            next_page=return_path(next_page),
            done="You have logged out: this browser no longer holds your token." if out else None,
        )

    @post("/", name="console:login-submit", status_code=303, include_in_schema=False)
    async def submit(
        self, request: Request[Any, Any, Any], console_gate: NamedDependency[LoginGate]
    ) -> Response[Any]:
        if not console_gate.known:
            return Redirect("/ui/", status_code=303)
        form = await request.form()
        back = return_path(form.get("next"))
        if not login_csrf_ok(request, form.get(CSRF_FIELD)):
            return _login_page(
                request, 403, "The login form had expired: please log in again.", next_page=back
            )
        token = form.get("token")
        token = token.strip() if isinstance(token, str) else ""
        if not token:  # nothing guessed: neither counted nor refused
            return _login_page(request, 401, "Enter an API token.", next_page=back)
        # The API's limit on guessing counts the login form's failures too.
        peer = request.client.host if request.client else ""
        wait = console_gate.limiter.retry_after(peer)
        if wait is not None:
            response = _login_page(
                request,
                429,
                f"Too many unknown tokens from this address: try again in {wait} s.",
                next_page=back,
            )
            response.headers["Retry-After"] = str(wait)
            return response
        if grant_of(console_gate.known, token) is None:
            console_gate.limiter.failed(peer)
            return _login_page(request, 401, "That token is not configured.", next_page=back)
        redirect = Redirect(back or "/ui/", status_code=303)
        redirect.set_cookie(session_cookie(request, token))
        return redirect


def _login_page(
    request: Request[Any, Any, Any],
    status: int,
    error: str | None,
    *,
    tokens_configured: bool = True,
    next_page: str | None = None,
    done: str | None = None,
) -> Response[str]:
    """The login form, its CSRF token bound to the browser's login cookie; `next_page`
    is where a successful login leads (the console's front page without one)."""
    secret, new = login_form_secret(request)
    response = render(
        request,
        "login.html",
        status_code=status,
        error=error,
        done=done,
        live=False,
        login_csrf=csrf_token_of(secret),
        tokens_configured=tokens_configured,
        next_page=next_page,
    )
    if new:
        response.set_cookie(login_cookie(request, secret))
    return response


@dataclass(frozen=True)
class LoginGate:
    """What the login form checks a token against, and the API's failure limiter."""

    known: dict[bytes, Grant]
    limiter: FailureLimiter
