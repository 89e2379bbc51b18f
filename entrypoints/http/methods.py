"""The methods a path serves, as `OPTIONS` and a 405 tell them (docs/api.md, "Methods").

Litestar builds a path's `OPTIONS` answer when it first sees the path, and keeps that
list when later route handlers add methods to it (`OPTIONS /tasks` said `OPTIONS,
POST`); its 405 lists them in the order of a set. Here both are the route's final
methods, sorted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from litestar import Request, Response
from litestar.routes import HTTPRoute


def allow(methods: Iterable[str]) -> str:
    """The value of an `Allow` header: each method once, sorted."""
    return ", ".join(sorted({method.strip().upper() for method in methods if method.strip()}))


async def answer_options(request: Request[Any, Any, Any]) -> Response[None] | None:
    """The application's `before_request` hook: answers `OPTIONS` with every method its
    path serves; any other method goes on to its handler."""
    if request.method != "OPTIONS":
        return None
    template = request.scope.get("path_template")
    served = {
        method
        for route in request.app.routes
        if isinstance(route, HTTPRoute) and route.path_format == template
        for method in route.methods
    }
    return Response(None, status_code=204, headers={"Allow": allow(served)})
