"""Errors as pages: the API's own mapping (entrypoints.http.problems) decides the status
and the words; the console shows them as HTML, and sends the anonymous to log in."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode, urlsplit

from litestar import Request, Response
from litestar.exceptions import MethodNotAllowedException, NotFoundException
from litestar.response import Redirect
from litestar.types import ExceptionHandlersMap

from entrypoints.http.console.access import LoginRequired, return_path
from entrypoints.http.console.rendering import SECURITY_HEADERS, render
from entrypoints.http.problems import EXCEPTION_HANDLERS, http_error


def login_required(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """To the login page, and from there back to the page asked for (a link from an
    alert); a form posted without a session was not acted on, and the login page says
    so, coming back to the page the form was on."""
    if request.method in ("GET", "HEAD"):
        asked = request.url.query
        wanted, lost = request.url.path + (f"?{asked}" if asked else ""), False
    else:
        referer = urlsplit(request.headers.get("referer", ""))
        wanted, lost = referer.path + (f"?{referer.query}" if referer.query else ""), True
    back: dict[str, str] = {"next": page} if (page := return_path(wanted)) else {}
    if lost:
        back["lost"] = "1"
    return Redirect("/ui/login" + (f"?{urlencode(back)}" if back else ""), status_code=303)


def error_page(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    handler = next(
        EXCEPTION_HANDLERS[cls] for cls in type(exc).__mro__ if cls in EXCEPTION_HANDLERS
    )
    problem = handler(request, exc)
    content = problem.content if isinstance(problem.content, dict) else {}
    response = render(
        request,
        "error.html",
        status_code=problem.status_code or 500,
        title=content.get("title", "Error"),
        detail=content.get("detail", ""),
        errors=content.get("errors") or [],
        live=False,
    )
    kept = {name.lower(): value for name, value in problem.headers.items()}
    for name in ("Retry-After", "Allow"):
        if name.lower() in kept:
            response.headers[name] = kept[name.lower()]
    return response


def unrouted(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """An unknown path or method (found before any router, so at the app): under /ui
    the console's error page with the console's headers, elsewhere the API's problem."""
    path = request.url.path
    if path != "/ui" and not path.startswith("/ui/"):
        return http_error(request, exc)
    response = error_page(request, exc)
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    response.headers["Cache-Control"] = "no-store"
    return response


# At the app: what routing refuses before the console's router is reached.
UNROUTED_HANDLERS: ExceptionHandlersMap = {
    NotFoundException: unrouted,
    MethodNotAllowedException: unrouted,
}

# Every type the API maps, so no JSON handler of an outer layer wins by the MRO.
CONSOLE_EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    **dict.fromkeys(EXCEPTION_HANDLERS, error_page),
    LoginRequired: login_required,
}
