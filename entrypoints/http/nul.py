"""No text with U+0000 gets in through a URL either (docs/api.md, "Text"): a guard on
every route that names the query or path parameter holding one."""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from domain.errors import InvalidRequest
from domain.validation import NUL_MESSAGE


async def nul_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    # A coroutine, as every guard here: Litestar runs a plain function in a thread.
    query = connection.scope.get("query_string", b"")
    if b"%00" not in query and b"\x00" not in query and "\x00" not in connection.scope["path"]:
        return
    for name, value in connection.query_params.multi_items():
        if "\x00" in name or "\x00" in value:
            raise InvalidRequest(name.replace("\x00", "\ufffd"), NUL_MESSAGE)
    for name, value in connection.path_params.items():
        if isinstance(value, str) and "\x00" in value:
            raise InvalidRequest(name, NUL_MESSAGE)
