"""Query parameters are checked as strictly as bodies (docs/api.md, "Conventions").

- A parameter the route does not take is a 422 naming it: `GET /runs?state=failed` would
  otherwise list every run, so a misspelt filter never silently does nothing.
- A parameter given twice is a 422 naming it: Litestar would keep the last, so
  `?status=succeeded&status=failed` would list only the failed runs.
- An instant is an RFC 3339 date-time with an offset: Litestar would also read a number
  as epoch seconds (`?since=0.5` is 1970) and a date as its midnight.
- An integer is written in decimal digits (`5`): Litestar would also read `1.0` or
  `1e1`.
- Boolean ones are `true` or `false`: Litestar would also read `1`, `True`, `yes` or
  `on`, so a guard on each route that has one refuses every other spelling, naming the
  parameter, before Litestar reads it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from domain.errors import InvalidRequest

Guard = Callable[[ASGIConnection[Any, Any, Any, Any], BaseRouteHandler], Coroutine[Any, Any, None]]


# A cursor is declared non-empty in the schema only: an empty one is refused by the
# cursor's own check (application/pagination.py), whose message says what to do; the
# parameter's validation would only say "length >= 1".
NON_EMPTY = {"minLength": 1}


@dataclass(frozen=True)
class _Taken:
    """The query parameters a route handler takes: all, those that take one value, and
    those that are instants."""

    names: frozenset[str]
    single: frozenset[str]
    instants: frozenset[str]
    integers: frozenset[str]


# Found from each handler's signature on first use. Keyed by the handler's function:
# guards are given a copy of the handler, a new object on every request.
_taken: dict[Any, _Taken] = {}


def _query_names(handler: BaseRouteHandler, path_parameters: dict[str, Any]) -> _Taken:
    key = (handler.fn, frozenset(path_parameters))
    taken = _taken.get(key)
    if taken is None:
        model = handler.create_kwargs_model(path_parameters=path_parameters)
        params = model.expected_query_params
        signature = handler.parsed_fn_signature.parameters
        taken = _Taken(
            names=frozenset(p.field_alias for p in params),
            single=frozenset(p.field_alias for p in params if not p.is_sequence),
            instants=frozenset(
                p.field_alias
                for p in params
                if any(t.is_subclass_of(datetime) for t in _types(signature[p.field_name]))
            ),
            integers=frozenset(
                p.field_alias
                for p in params
                if any(t.annotation is int for t in _types(signature[p.field_name]))
            ),
        )
        _taken[key] = taken
    return taken


def _types(field: Any) -> list[Any]:
    """`field` and, for an optional or a union, each of its members."""
    return [field, *field.inner_types] if field.is_union else [field]


# RFC 3339 `date-time` (`T` or `t`, or a space as its section 5.6 allows; any fraction),
# checked before Litestar reads the value: pydantic would take a number, or a date.
_INSTANT = re.compile(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)")


_INTEGER = re.compile(r"0|[1-9][0-9]*")


def _instant_error(value: str) -> str | None:
    """Why `value` is no instant, or None."""
    if _INSTANT.fullmatch(value):
        try:
            datetime.fromisoformat(value.upper())
        except ValueError:
            pass  # a month 13, an hour 24: the message below
        else:
            return None
    message = f"must be an RFC 3339 date-time with an offset (2026-01-01T00:00:00Z), not {value!r}"
    if _INSTANT.fullmatch(value[:19] + "+" + value[20:]):
        # A `+` in a query string reads as a space.
        message += "; send the + of an offset as %2B"
    return message


async def known_query(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    """Refuse a query parameter the route does not take, one given twice, or an instant
    that is not RFC 3339 with an offset, naming it (the first, sorted)."""
    if not connection.scope.get("query_string"):
        return
    taken = _query_names(handler, connection.path_params)
    query = connection.query_params
    unknown = sorted(set(query) - taken.names)
    if unknown:
        accepted = ", ".join(sorted(taken.names)) or "none"
        raise InvalidRequest(unknown[0], f"unknown query parameter (this route takes: {accepted})")
    for name in sorted(taken.single & set(query)):
        if len(query.getall(name)) > 1:
            raise InvalidRequest(name, "given twice (this parameter takes one value)")
    for name in sorted(taken.instants & set(query)):
        error = _instant_error(query[name])
        if error is not None:
            raise InvalidRequest(name, error)
    for name in sorted(taken.integers & set(query)):
        if not _INTEGER.fullmatch(value := query[name]):
            raise InvalidRequest(name, f"must be an integer written in digits (50), not {value!r}")


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
