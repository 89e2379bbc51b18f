"""Errors as RFC 9457 problem details: the one table that maps exceptions to answers."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from enum import Enum
from http import HTTPStatus
from typing import Any, get_args

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.types import ExceptionHandlersMap
from pydantic import BaseModel, ValidationError

from domain.errors import (
    BackfillNotFound,
    CalendarInUse,
    CalendarNotFound,
    CalendarVersionConflict,
    DuplicateCalendarName,
    DuplicateTaskName,
    InvalidRequest,
    PreconditionNotMet,
    RunNotFound,
    RunNotRunning,
    ScheduleMoved,
    StoreUnavailable,
    TaskNotFound,
    VersionConflict,
    WriteContended,
)
from domain.validation import FieldError, field_errors
from entrypoints.http.methods import allow

PROBLEM_JSON = "application/problem+json"
PROBLEM_TYPE = "urn:imbi-scheduler:problem:"
log = logging.getLogger(__name__)


class FieldProblem(BaseModel):
    field: str
    message: str


class Problem(BaseModel):
    """An RFC 9457 problem detail. `errors` comes with validation errors (422) only."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[FieldProblem] | None = None


class PreconditionFailed(HTTPException):
    """An `If-Match` that can never match (not an entity tag this service issues), sent
    to write `what` (a task or a calendar)."""

    status_code = 412

    def __init__(self, detail: str, what: str = "task") -> None:
        super().__init__(detail=detail)
        self.what = what


class NotReady(Exception):
    """/readyz found a check failing; `checks` says which."""

    def __init__(self, checks: Mapping[str, str]) -> None:
        failed = ", ".join(f"{name} {state}" for name, state in checks.items() if state != "ok")
        super().__init__(f"not ready: {failed}")
        self.checks = dict(checks)


def problem(
    status: int,
    slug: str,
    detail: str,
    *,
    errors: Sequence[FieldError] | None = None,
    headers: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Response[dict[str, Any]]:
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE + slug,
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": _encodable(detail),
    }
    if errors is not None:
        body["errors"] = [
            {"field": _encodable(e.field), "message": _encodable(e.message)} for e in errors
        ]
    body.update(extra or {})
    return Response(body, status_code=status, media_type=PROBLEM_JSON, headers=dict(headers or {}))


def _encodable(text: str) -> str:
    """`text` as UTF-8 can carry it: a lone surrogate a request sent (`"\\ud800"`, as a
    member's name) and the answer names is written as its escape, not a failed answer."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode()
    return text


def _validation(errors: Sequence[FieldError]) -> Response[dict[str, Any]]:
    fields = ", ".join(dict.fromkeys(e.field for e in errors))
    return problem(422, "validation", f"the request is not valid: {fields}", errors=errors)


def not_found(_: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    return problem(404, "not-found", str(exc))


def conflict(_: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    if isinstance(exc, CalendarInUse):
        return problem(409, "calendar-in-use", str(exc), extra={"tasks": exc.tasks})
    duplicate = isinstance(exc, DuplicateTaskName | DuplicateCalendarName)
    return problem(409, "duplicate-name" if duplicate else "run-not-running", str(exc))


def version_conflict(_: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    detail = exc.detail if isinstance(exc, HTTPException) else str(exc)
    if isinstance(exc, PreconditionFailed):
        what = exc.what
    else:
        what = "calendar" if isinstance(exc, CalendarVersionConflict) else "task"
    return problem(412, "stale-version", f"{detail}; read the {what} again and retry")


def precondition_not_met(_: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    return problem(412, "precondition-failed", str(exc))


def invalid_request(_: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    assert isinstance(exc, InvalidRequest)
    return _validation(exc.errors)


def invalid_model(_: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    assert isinstance(exc, ValidationError)
    return _validation(field_errors(exc))


def invalid_parameter(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    """Litestar's own validation of query, path and header parameters, its messages said
    as the rest of the API says them."""
    assert isinstance(exc, ValidationException)
    extra = exc.extra if isinstance(exc.extra, list) else []
    errors = [
        # Litestar names a missing body by the handler's parameter, `data`.
        FieldError("body", "a JSON body is required")
        if item.get("key") == "data"
        else FieldError(
            key := str(item.get("key") or "request"),
            _worded(str(item.get("message") or "is invalid"), _choices(request, key)),
        )
        for item in extra
        if isinstance(item, dict)
    ]
    return _validation(errors or [FieldError("request", exc.detail)])


# msgspec's wording of a parameter's type and bounds, and the API's.
_REWORDED = [
    (re.compile(r"Expected `int` >= (-?\d+)"), "must be an integer of at least {0}"),
    (re.compile(r"Expected `int` <= (-?\d+)"), "must be an integer of at most {0}"),
    (re.compile(r"Expected `int`, got `\w+`"), "must be an integer"),
]


def _worded(message: str, choices: list[str] | None) -> str:
    if choices is not None and message.startswith("Invalid enum value"):
        return f"must be one of {', '.join(choices)}"
    for pattern, wording in _REWORDED:
        if match := pattern.fullmatch(message):
            return wording.format(*match.groups())
    return message


def _choices(request: Request[Any, Any, Any], key: str) -> list[str] | None:
    """The values of the enum the handler's parameter `key` takes, if it takes one."""
    try:  # a request refused before it was routed has no handler
        parameter = request.route_handler.parsed_fn_signature.parameters.get(key)
    except (AttributeError, KeyError):
        return None
    if parameter is None:
        return None
    for kind in (parameter.annotation, *get_args(parameter.annotation)):
        if isinstance(kind, type) and issubclass(kind, Enum):
            return [str(member.value) for member in kind]
    return None


def store_unavailable(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    observer = getattr(request.app.state, "observer", None)
    if observer is not None:
        observer.store_error(exc)
    log.warning("store unavailable", extra={"path": request.url.path})
    detail = "the task store is unavailable; retry shortly"
    if request.method not in ("GET", "HEAD"):
        detail += (
            " (a change whose answer the lost connection took may have been made: read it"
            " back before sending it again)"
        )
    return problem(503, "store-unavailable", detail, headers={"Retry-After": "5"})


def contended(_: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    return problem(503, "contended", str(exc), headers={"Retry-After": "1"})


def not_ready(_: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    assert isinstance(exc, NotReady)
    return problem(503, "not-ready", str(exc), extra={"checks": exc.checks})


def http_error(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    if status >= 500:
        return internal_error(request, exc)
    slug = HTTPStatus(status).phrase.lower().replace(" ", "-").replace("'", "")
    headers = dict(exc.headers or {})
    if "allow" in headers:  # a 405: Litestar's order is a set's
        headers = {"Allow": allow(headers.pop("allow").split(","))} | headers
    return problem(status, slug, exc.detail, headers=headers)


def internal_error(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    # The trace goes to the log only: it may hold SQL, a URL or a secret.
    log.error(
        "unhandled error on %s %s",
        request.method,
        request.url.path,
        exc_info=(type(exc), exc, exc.__traceback__),
    )
    return problem(500, "internal", "an internal error occurred; it has been logged")


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    TaskNotFound: not_found,
    CalendarNotFound: not_found,
    DuplicateCalendarName: conflict,
    CalendarInUse: conflict,
    RunNotFound: not_found,
    BackfillNotFound: not_found,
    DuplicateTaskName: conflict,
    RunNotRunning: conflict,
    VersionConflict: version_conflict,
    PreconditionFailed: version_conflict,
    PreconditionNotMet: precondition_not_met,
    InvalidRequest: invalid_request,
    ValidationError: invalid_model,
    ValidationException: invalid_parameter,
    StoreUnavailable: store_unavailable,
    WriteContended: contended,
    ScheduleMoved: contended,  # each use case plans again; never expected here
    NotReady: not_ready,
    HTTPException: http_error,
    Exception: internal_error,
}
