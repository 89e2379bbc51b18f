"""Bearer-token access: who may read and who may change; token guessing slowed down."""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.exceptions import (
    NotAuthorizedException,
    PermissionDeniedException,
    TooManyRequestsException,
)
from litestar.handlers import BaseRouteHandler, HTTPRouteHandler
from litestar.types import Guard

from entrypoints.settings import Access, Grant

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Handlers that change nothing although their method is POST (dry run, preview) say so
# with `opt={MUTATION: False}`, so read-only tokens may call them.
MUTATION = "mutation"
BEARER_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="imbi-scheduler"'}
# Where the guard leaves the label of the token a request came with (None: no label, or
# no tokens configured); `actor()` reads it for the use cases, which record it.
ACTOR = "actor"
# Where it leaves whether that token is read-only: for a route open to such tokens only
# for part of what it does (an apply's dry run), which the handler then checks.
READ_ONLY = "read_only"
_UNAUTHORIZED_DETAIL = "send a configured API token as 'Authorization: Bearer <token>'"
# A limiter tracking more client addresses than this forgets those with no recent failure.
_MAX_TRACKED_PEERS = 10_000


class FailureLimiter:
    """At most `limit` failed authentications per client address within a sliding
    `window` of seconds (`limit` 0: no limit). Past it, the address is refused until
    its oldest counted failure leaves the window; other addresses are never affected,
    and nobody is made to wait: a refusal is an answer at once."""

    def __init__(
        self, limit: int, window: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._limit = limit
        self._window = window
        self._clock = clock
        # Client address -> the times of its latest failures (at most `limit`).
        self._failures: dict[str, deque[float]] = {}

    def retry_after(self, peer: str) -> int | None:
        """Whole seconds until `peer` may try again, or None when it may now."""
        failures = self._failures.get(peer)
        if not self._limit or failures is None or len(failures) < self._limit:
            return None
        wait = failures[0] + self._window - self._clock()
        return math.ceil(wait) if wait > 0 else None

    def failed(self, peer: str) -> None:
        if not self._limit:
            return
        failures = self._failures.get(peer)
        if failures is None:
            if len(self._failures) >= _MAX_TRACKED_PEERS:
                self._forget_stale()
            failures = self._failures[peer] = deque(maxlen=self._limit)
        failures.append(self._clock())

    def _forget_stale(self) -> None:
        since = self._clock() - self._window
        self._failures = {p: f for p, f in self._failures.items() if f[-1] > since}
        while len(self._failures) >= _MAX_TRACKED_PEERS:  # all recent: drop the oldest
            del self._failures[next(iter(self._failures))]


def bearer_guard(
    tokens: Mapping[str, Access | Grant], limiter: FailureLimiter | None = None
) -> Guard:
    """A guard that admits configured tokens (all requests when none are configured):
    401 without a known token, 403 for a read-only token on a mutation, 429 (with
    `Retry-After`) for a client address past `limiter`'s count of unknown tokens, whose
    token is then not even looked at, so guessing on gains nothing. A request with no
    bearer token at all guesses nothing: it is a 401, never counted nor refused. It
    leaves the token's label in the request's state (`ACTOR`)."""
    # Tokens are compared by digest: equal lengths, so the time taken reveals no length.
    known = digest_grants(tokens)
    limiter = limiter or FailureLimiter(0, 0)

    # A coroutine: Litestar runs a plain-function guard in a worker thread, two thread
    # hops on every request for a check that never blocks.
    async def guard(
        connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
    ) -> None:
        if not known:
            return
        credentials = _bearer(connection.headers.get("authorization", ""))
        if credentials is None:  # no guess to count or refuse: a plain 401
            raise NotAuthorizedException(detail=_UNAUTHORIZED_DETAIL, headers=BEARER_CHALLENGE)
        peer = connection.client.host if connection.client else ""
        wait = limiter.retry_after(peer)
        if wait is not None:
            raise TooManyRequestsException(
                detail="too many requests with an unknown API token from this address",
                headers={"Retry-After": str(wait)},
            )
        grant = _match(known, credentials)
        if grant is None:
            limiter.failed(peer)
            raise NotAuthorizedException(detail=_UNAUTHORIZED_DETAIL, headers=BEARER_CHALLENGE)
        if grant.access is Access.READ and is_mutation(handler):
            raise PermissionDeniedException(detail="this token is read-only")
        connection.state[ACTOR] = grant.label
        connection.state[READ_ONLY] = grant.access is Access.READ

    return guard


def refuse_read_only(request: Request[Any, Any, Any], what: str) -> None:
    """403 for a read-only token, on a route that lets such tokens in for part of what it
    does (`opt={MUTATION: False}`): `what` says which part it may not do."""
    if request.state.get(READ_ONLY) is True:
        raise PermissionDeniedException(detail=f"this token is read-only: {what}")


def actor_of(request: Request[Any, Any, Any]) -> str | None:
    """The label of the token the request came with (the actor history records).
    Handlers call it on their request rather than take it as a dependency: Litestar
    resolves two dependencies of one handler side by side in a task group of their own,
    about 50 µs of CPU on every write."""
    label = request.state.get(ACTOR)
    return label if isinstance(label, str) else None


def is_mutation(handler: BaseRouteHandler) -> bool:
    methods = handler.http_methods if isinstance(handler, HTTPRouteHandler) else set()
    return bool(handler.opt.get(MUTATION, not methods <= SAFE_METHODS))


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _bearer(header: str) -> str | None:
    """The token of an `Authorization: Bearer <token>` header; None for no header, an
    empty token or another scheme."""
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return None
    return credentials.strip()


def _match(tokens: Mapping[bytes, Grant], credentials: str) -> Grant | None:
    presented = _digest(credentials)
    found = None
    for token, grant in tokens.items():
        # Compared with every token, each in constant time: timing reveals nothing.
        if hmac.compare_digest(presented, token):
            found = grant
    return found


def digest_grants(tokens: Mapping[str, Access | Grant]) -> dict[bytes, Grant]:
    """The configured tokens by digest, as the guards compare them."""
    return {
        _digest(token): grant if isinstance(grant, Grant) else Grant(grant)
        for token, grant in tokens.items()
    }


def grant_of(known: Mapping[bytes, Grant], token: str) -> Grant | None:
    """What a token presented without a header (the console's cookie) may do; None for
    a token not configured. `known` is `digest_grants` of the configured tokens."""
    return _match(known, token.strip()) if token.strip() else None
