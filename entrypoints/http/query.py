"""Query parameters are checked as strictly as bodies (docs/api.md, "Conventions").

- A parameter the route does not take is a 422 naming it: `GET /runs?state=failed` would
  otherwise list every run, so a misspelt filter never silently does nothing.
- Boolean ones are `true` or `false`: Litestar would also read `1`, `True`, `yes` or
  `on`, so a guard on each route that has one refuses every other spelling, naming the
  parameter, before Litestar reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from domain.errors import InvalidRequest

Guard = Callable[[ASGIConnection[Any, Any, Any, Any], BaseRouteHandler], Coroutine[Any, Any, None]]


# The query parameters each route handler takes, found from its signature on first use.
# Keyed by the handler's function: guards are given a copy of the handler, a new object
# on every request.
_taken: dict[Any, frozenset[str]] = {}


def _query_names(handler: BaseRouteHandler, path_parameters: dict[str, Any]) -> frozenset[str]:
    key = (handler.fn, frozenset(path_parameters))
    names = _taken.get(key)
    if names is None:
        model = handler.create_kwargs_model(path_parameters=path_parameters)
        names = frozenset(p.field_alias for p in model.expected_query_params)
        _taken[key] = names
    return names


async def known_query(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    """Refuse a query parameter the route does not take, naming it (the first, sorted)."""
    if not connection.scope.get("query_string"):
        return
    taken = _query_names(handler, connection.path_params)
    unknown = sorted(set(connection.query_params) - taken)
    if unknown:
        accepted = ", ".join(sorted(taken)) or "none"
        raise InvalidRequest(unknown[0], f"unknown query parameter (this route takes: {accepted})")


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
