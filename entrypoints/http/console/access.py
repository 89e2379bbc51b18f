"""Who is using the console: the session cookie, the CSRF token bound to it, the guard.

With API tokens configured the cookie holds the token the person logged in with (so
the console grants exactly what the API would); without tokens it holds a random
session id, which the CSRF token is bound to just the same.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from litestar import Request, Response
from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers import BaseRouteHandler

from entrypoints.http.auth import ACTOR, digest_grants, grant_of, is_mutation
from entrypoints.settings import Access, Grant

COOKIE = "imbi_console"
# Before logging in there is no session yet: the login form's CSRF token is bound to a
# random value in a cookie of its own, so another site cannot log a browser in with a
# token of its choosing.
LOGIN_COOKIE = "imbi_console_login"
CSRF_FIELD = "csrf_token"
_CSRF_CONTEXT = b"imbi-scheduler console csrf v1"
SESSION_STATE = "console_session"


class LoginRequired(NotAuthorizedException):
    """No valid session: the console sends the person to its login page."""


def return_path(value: object) -> str | None:
    """The console page to go back to after logging in (`next`): only a path of this
    console, never another site's address nor the login page itself."""
    if not isinstance(value, str) or not value.startswith("/ui/") or len(value) > 2000:
        return None
    if value.startswith("/ui/login") or "\\" in value or any(ord(c) < 0x21 for c in value):
        return None
    # A browser resolves dot segments (also written %2e) before it asks: /ui/../schema
    # would lead out of the console.
    path = value.partition("?")[0].partition("#")[0]
    if any(segment in (".", "..") for segment in unquote(path).split("/")):
        return None
    return value


@dataclass(frozen=True, slots=True)
class Session:
    secret: str  # the cookie's value: the API token, or a random id without tokens
    access: Access
    anonymous: bool  # no tokens configured: nobody logs in or out
    new: bool = False  # the cookie still has to be set
    label: str | None = None  # the token's label: the actor task history records

    @property
    def can_change(self) -> bool:
        return self.access is Access.WRITE

    @property
    def csrf_token(self) -> str:
        return csrf_token_of(self.secret)


def csrf_token_of(secret: str) -> str:
    """Derived from the session's secret: another session cannot reuse it, and it does
    not reveal the secret."""
    return hmac.new(secret.encode(), _CSRF_CONTEXT, hashlib.sha256).hexdigest()


def session_guard(tokens: Mapping[str, Access | Grant]) -> Any:
    """A guard that finds the session (into `request.state`), sends the anonymous to the
    login page, refuses a read-only session's mutation (403) and any mutation whose
    form does not carry the session's CSRF token (403)."""
    known = digest_grants(tokens)

    # A coroutine: Litestar runs a plain-function guard in a worker thread.
    async def guard(
        connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
    ) -> None:
        cookie = connection.cookies.get(COOKIE, "")
        if not known:
            fresh = not cookie or len(cookie) != 43
            session = Session(
                cookie if not fresh else secrets.token_urlsafe(32),
                Access.WRITE,
                anonymous=True,
                new=fresh,
            )
        else:
            grant = grant_of(known, cookie) if cookie else None
            if grant is None:
                raise LoginRequired(detail="log in with an API token")
            session = Session(cookie, grant.access, anonymous=False, label=grant.label)
        connection.state[SESSION_STATE] = session
        connection.state[ACTOR] = session.label  # history records who changed a task
        if is_mutation(handler) and not session.can_change:
            raise PermissionDeniedException(detail="this token is read-only")

    return guard


async def check_csrf(request: Request[Any, Any, Any]) -> None:
    """Refuse (403) a form without the CSRF token of the request's session."""
    session = current_session(request)
    form = await request.form()
    sent = form.get(CSRF_FIELD)
    if (
        session.new
        or not isinstance(sent, str)
        or not hmac.compare_digest(sent, session.csrf_token)
    ):
        raise PermissionDeniedException(detail="the form's CSRF token is missing or stale")


def current_session(request: Request[Any, Any, Any]) -> Session:
    session: Session = request.state[SESSION_STATE]
    return session


def is_https(request: Request[Any, Any, Any]) -> bool:
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return forwarded == "https" or request.url.scheme == "https"


def session_cookie(request: Request[Any, Any, Any], value: str, *, clear: bool = False) -> Cookie:
    return _cookie(request, COOKIE, value, "/ui", clear=clear)


def login_form_secret(request: Request[Any, Any, Any]) -> tuple[str, bool]:
    """The value the login form's CSRF token is bound to, and whether it is new (its
    cookie still has to be set)."""
    known = request.cookies.get(LOGIN_COOKIE, "")
    if len(known) == 43:
        return known, False
    return secrets.token_urlsafe(32), True


def login_cookie(request: Request[Any, Any, Any], value: str) -> Cookie:
    return _cookie(request, LOGIN_COOKIE, value, "/ui/login")


def login_csrf_ok(request: Request[Any, Any, Any], sent: object) -> bool:
    """Whether a login form carried the CSRF token of its browser's login cookie."""
    known = request.cookies.get(LOGIN_COOKIE, "")
    return (
        len(known) == 43
        and isinstance(sent, str)
        and hmac.compare_digest(sent, csrf_token_of(known))
    )


def _cookie(
    request: Request[Any, Any, Any], key: str, value: str, path: str, *, clear: bool = False
) -> Cookie:
    return Cookie(
        key=key,
        value=value,
        path=path,
        httponly=True,
        samesite="strict",
        secure=is_https(request),
        max_age=0 if clear else None,
    )


def remember_new_session(request: Request[Any, Any, Any], response: Response[Any]) -> None:
    """Set the cookie of a session made on this request (anonymous consoles)."""
    session = request.state.get(SESSION_STATE)
    if isinstance(session, Session) and session.new:
        response.set_cookie(session_cookie(request, session.secret))
