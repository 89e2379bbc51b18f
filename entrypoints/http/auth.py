"""Bearer-token access: who may read and who may change."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers import BaseRouteHandler, HTTPRouteHandler
from litestar.types import Guard

from entrypoints.settings import Access

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Handlers that change nothing although their method is POST (dry run, preview) say so
# with `opt={MUTATION: False}`, so read-only tokens may call them.
MUTATION = "mutation"
BEARER_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="imbi-scheduler"'}


def bearer_guard(tokens: Mapping[str, Access]) -> Guard:
    """A guard that admits configured tokens (all requests when none are configured):
    401 without a known token, 403 for a read-only token on a mutation."""
    known = dict(tokens)

    def guard(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
        if not known:
            return
        access = _lookup(known, connection.headers.get("authorization", ""))
        if access is None:
            raise NotAuthorizedException(
                detail="send a configured API token as 'Authorization: Bearer <token>'",
                headers=BEARER_CHALLENGE,
            )
        if access is Access.READ and is_mutation(handler):
            raise PermissionDeniedException(detail="this token is read-only")

    return guard


def is_mutation(handler: BaseRouteHandler) -> bool:
    methods = handler.http_methods if isinstance(handler, HTTPRouteHandler) else set()
    return bool(handler.opt.get(MUTATION, not methods <= SAFE_METHODS))


def _lookup(tokens: Mapping[str, Access], header: str) -> Access | None:
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return None
    presented = credentials.strip().encode()
    found = None
    for token, access in tokens.items():
        # Compare against every token in constant time, so timing reveals nothing.
        if hmac.compare_digest(presented, token.encode()):
            found = access
    return found
