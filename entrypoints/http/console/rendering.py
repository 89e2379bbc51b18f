"""Templates (Jinja2, autoescaped) and the headers every console answer carries."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from litestar import Request, Response
from litestar.datastructures import MutableScopeHeaders
from litestar.enums import MediaType, ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from entrypoints.http.console.access import (
    CSRF_FIELD,
    SESSION_STATE,
    Session,
    remember_new_session,
)
from entrypoints.http.console.links import linked_ids
from entrypoints.http.console.words import local_time, relative_words, utc_time

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"

# No inline script or style, nothing from another origin; forms post only here.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}

_environment = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_environment.filters.update(local_time=local_time, utc_time=utc_time, linked_ids=linked_ids)
_environment.globals.update(relative_words=relative_words, csrf_field=CSRF_FIELD)


def render(
    request: Request[Any, Any, Any], template: str, status_code: int = 200, **context: Any
) -> Response[str]:
    session = request.state.get(SESSION_STATE)
    html = _environment.get_template(template).render(
        session=session if isinstance(session, Session) else None,
        path=request.url.path,
        **context,
    )
    response = Response(html, status_code=status_code, media_type=MediaType.HTML)
    remember_new_session(request, response)
    return response


def console_headers(app: ASGIApp) -> ASGIApp:
    """Middleware: security headers on every console answer, no caching of pages, and
    the server time to the first byte (`Server-Timing`, which bench/console.py reads)."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await app(scope, receive, send)
            return
        started = time.perf_counter()
        static = scope["path"].startswith("/ui/static/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableScopeHeaders.from_message(message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
                if not static:
                    headers.setdefault("Cache-Control", "no-store")
                elapsed = (time.perf_counter() - started) * 1000
                headers["Server-Timing"] = f"app;dur={elapsed:.1f}"
            await send(message)

        await app(scope, receive, send_with_headers)

    return wrapped
