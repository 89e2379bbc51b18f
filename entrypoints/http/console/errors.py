"""Errors as pages: the API's own mapping (entrypoints.http.problems) decides the status
and the words; the console shows them as HTML, and sends the anonymous to log in."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response
from litestar.response import Redirect
from litestar.types import ExceptionHandlersMap

from entrypoints.http.console.access import LoginRequired
from entrypoints.http.console.rendering import render
from entrypoints.http.problems import EXCEPTION_HANDLERS


def login_required(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    return Redirect("/ui/login", status_code=303)


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
    if "retry-after" in problem.headers:
        response.headers["Retry-After"] = problem.headers["retry-after"]
    return response


# Every type the API maps, so no JSON handler of an outer layer wins by the MRO.
CONSOLE_EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    **dict.fromkeys(EXCEPTION_HANDLERS, error_page),
    LoginRequired: login_required,
}
