"""Boolean query parameters are `true` or `false` (docs/api.md, "Conventions"): Litestar
would also read `1`, `True`, `yes` or `on`, so a guard on each route that has one refuses
every other spelling, naming the parameter, before Litestar reads it."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from domain.errors import InvalidRequest

Guard = Callable[[ASGIConnection[Any, Any, Any, Any], BaseRouteHandler], Coroutine[Any, Any, None]]


def boolean_query(*names: str) -> Guard:
    """A guard refusing any value of the query parameters `names` but `true` or `false`."""

    async def guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        # A coroutine, as every guard here: Litestar runs a plain function in a thread.
        if not connection.scope.get("query_string"):
            return
        for name in names:
            for value in connection.query_params.getall(name, []):
                if value not in ("true", "false"):
                    raise InvalidRequest(name, f"must be true or false, not {value!r}")

    return guard
