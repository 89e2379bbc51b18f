"""Credentials for a target: secrets read from the environment when a call is made, and
OAuth2 client-credentials tokens (RFC 6749 section 4.4), cached until shortly before
they expire."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

import httpx

from adapters.http.failures import describe, scrub
from domain.credential_headers import is_credential_header
from domain.names import reserved_env_name
from domain.tasks import Auth, BasicAuth, BearerAuth, OAuth2ClientCredentials

logger = logging.getLogger("scheduler.http")

REDACTED = "***"
# A token is refreshed this long before it expires (at most a tenth of its lifetime).
REFRESH_MARGIN_SECONDS = 60.0
# How long a token without `expires_in` is kept (a 401 drops it sooner).
DEFAULT_TOKEN_LIFETIME = 300.0
MAX_TOKEN_LIFETIME = 86_400.0


class MissingSecret(Exception):
    """The environment variable naming a secret is unset or empty, or holds what no
    header may carry; the message never holds the value."""

    def __init__(self, name: str, field: str, problem: str = "is not set") -> None:
        super().__init__(f"environment variable {name} {problem} (named by {field})")
        self.name = name
        self.field = field


class TokenError(Exception):
    """The OAuth2 token endpoint did not hand out a token."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


def read_secret(environ: Mapping[str, str], name: str, field: str) -> str:
    # A task stored before names such as SCHEDULER_API_TOKENS were refused: never read.
    if (why := reserved_env_name(name)) is not None:
        raise MissingSecret(name, field, why)
    value = environ.get(name, "")
    if not value:
        raise MissingSecret(name, field)
    return value


# What HTTP strips around a field value (RFC 9110 5.5), and what no value may hold.
_SURROUNDING = " \t\r\n"
_NEVER_IN_A_HEADER = frozenset("\r\n\0")


def read_header_secret(environ: Mapping[str, str], name: str, field: str) -> str:
    """A secret sent as (part of) a header value: without the whitespace around it, as
    HTTP reads a field value anyway, so the line break that ends a secret written to a
    file (a Kubernetes Secret made from one) is not sent. One left inside fails the
    call, naming the variable and never the value."""
    value = read_secret(environ, name, field).strip(_SURROUNDING)
    if not value:
        raise MissingSecret(name, field, "holds only whitespace")
    if not _NEVER_IN_A_HEADER.isdisjoint(value):
        raise MissingSecret(name, field, "holds a line break or NUL, which no header may carry")
    return value


@dataclass(frozen=True, slots=True)
class _TokenKey:
    token_url: str
    client_id: str
    scope: str | None
    audience: str | None
    # A digest of the client secret: a rotated secret, or another variable naming a
    # different secret for the same client, never reuses a token it did not earn.
    secret_digest: str


@dataclass(slots=True)
class _Cached:
    token: str
    fresh_until: float  # time.monotonic()


@dataclass
class Credentials:
    """What one call authenticates with. `secrets` lists every value to keep out of
    errors, logs and excerpts."""

    auth: Auth
    secrets: list[str] = field(default_factory=list)
    header: str | None = None  # Authorization value, for bearer and basic
    oauth2_secret: str | None = None
    token: str | None = None  # the OAuth2 token the last call used
    headers: dict[str, str] = field(default_factory=dict)  # from headers_env


def credentials_for(
    auth: Auth,
    environ: Mapping[str, str],
    headers_env: Mapping[str, str] | None = None,
    *,
    owner: str = "target",
) -> Credentials:
    """Read the secrets `auth` and `headers_env` name; `owner` is where they were given
    ("target" or "notify"), for the error. Raises MissingSecret."""
    credentials = _auth_credentials(auth, environ, owner)
    for header, name in (headers_env or {}).items():
        value = read_header_secret(environ, name, f"{owner}.headers_env.{header}")
        credentials.headers[header] = value
        credentials.secrets.append(value)
    return credentials


def literal_credentials(headers: Mapping[str, str]) -> list[str]:
    """The credentials a target's literal `headers` carry (an `Authorization` a task
    stored before such headers were refused), to keep out of excerpts and errors as the
    others are: the whole value, and what follows its scheme."""
    found: list[str] = []
    for name, value in headers.items():
        if is_credential_header(name) and value.strip():
            found.append(value.strip())
            _, _, rest = value.strip().partition(" ")
            if rest.strip():
                found.append(rest.strip())
    return found


def _auth_credentials(auth: Auth, environ: Mapping[str, str], owner: str) -> Credentials:
    if isinstance(auth, BearerAuth):
        token = read_header_secret(environ, auth.token_env, f"{owner}.auth.token_env")
        return Credentials(auth, [token], header=f"Bearer {token}")
    if isinstance(auth, BasicAuth):
        password = read_secret(environ, auth.password_env, f"{owner}.auth.password_env")
        encoded = base64.b64encode(f"{auth.username}:{password}".encode()).decode()
        return Credentials(auth, [password, encoded], header=f"Basic {encoded}")
    if isinstance(auth, OAuth2ClientCredentials):
        secret = read_secret(environ, auth.client_secret_env, f"{owner}.auth.client_secret_env")
        return Credentials(auth, [secret, _basic(auth.client_id, secret)], oauth2_secret=secret)
    return Credentials(auth)


def redacted_header(auth: Auth) -> str | None:
    """The Authorization header a dry run shows, without reading any secret."""
    if isinstance(auth, BearerAuth | OAuth2ClientCredentials):
        return f"Bearer {REDACTED}"
    if isinstance(auth, BasicAuth):
        return f"Basic {REDACTED}"
    return None


def _basic(client_id: str, secret: str) -> str:
    # RFC 6749 2.3.1: both parts are form-encoded before the Basic encoding.
    pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}"
    return base64.b64encode(pair.encode()).decode()


class OAuth2Tokens:
    """A cache of client-credentials tokens shared by every run of the executor; one
    fetch at a time per key, so a burst of runs asks the token endpoint once."""

    def __init__(self, client: Callable[[], httpx.AsyncClient]) -> None:
        self._client = client
        self._cache: dict[_TokenKey, _Cached] = {}
        self._locks: dict[_TokenKey, asyncio.Lock] = {}

    async def authorization(self, credentials: Credentials, timeout_seconds: float) -> str:
        """The Authorization header value, fetching a token when none is fresh.
        Raises TokenError."""
        auth = credentials.auth
        assert isinstance(auth, OAuth2ClientCredentials)
        assert credentials.oauth2_secret is not None
        key = _key(auth, credentials.oauth2_secret)
        cached = self._fresh(key)
        if cached is None:
            async with self._locks.setdefault(key, asyncio.Lock()):
                cached = self._fresh(key) or await self._fetch(
                    key, auth, credentials.oauth2_secret, timeout_seconds
                )
        credentials.token = cached.token
        if cached.token not in credentials.secrets:
            credentials.secrets.append(cached.token)
        return f"Bearer {cached.token}"

    def drop(self, credentials: Credentials) -> None:
        """Forget the token `credentials` last used (the target answered 401)."""
        auth = credentials.auth
        if not isinstance(auth, OAuth2ClientCredentials) or credentials.oauth2_secret is None:
            return
        key = _key(auth, credentials.oauth2_secret)
        cached = self._cache.get(key)
        if cached is not None and cached.token == credentials.token:
            del self._cache[key]

    def _fresh(self, key: _TokenKey) -> _Cached | None:
        cached = self._cache.get(key)
        if cached is not None and cached.fresh_until > time.monotonic():
            return cached
        return None

    async def _fetch(
        self, key: _TokenKey, auth: OAuth2ClientCredentials, secret: str, timeout_seconds: float
    ) -> _Cached:
        form = {"grant_type": "client_credentials"}
        if auth.scope is not None:
            form["scope"] = auth.scope
        if auth.audience is not None:
            form["audience"] = auth.audience
        headers = {"Accept": "application/json"}
        if auth.client_auth == "post":
            form |= {"client_id": auth.client_id, "client_secret": secret}
        else:
            headers["Authorization"] = f"Basic {_basic(auth.client_id, secret)}"
        secrets = [secret, _basic(auth.client_id, secret)]
        where = f"oauth2 token request to {auth.token_url}"
        request = self._client().build_request(
            "POST",
            auth.token_url,
            data=form,
            headers=headers,
            timeout=httpx.Timeout(timeout_seconds),
        )
        try:
            response = await self._client().send(request)
        except Exception as exc:  # httpx's errors and the guard's
            failure = describe(exc, request.url, timeout_seconds)
            raise TokenError(
                scrub(f"{where} failed: {failure.message}", secrets), retryable=failure.retryable
            ) from None
        token, lifetime = _parse_token(response, where)
        fresh_for = lifetime - min(REFRESH_MARGIN_SECONDS, lifetime / 10)
        cached = _Cached(token, time.monotonic() + fresh_for)
        if fresh_for > 0:
            self._cache[key] = cached
        logger.info(
            "oauth2 token fetched from %s for client %s, valid %gs",
            auth.token_url,
            auth.client_id,
            lifetime,
            extra={"token_url": auth.token_url, "client_id": auth.client_id},
        )
        return cached


def _key(auth: OAuth2ClientCredentials, secret: str) -> _TokenKey:
    digest = hashlib.sha256(secret.encode()).hexdigest()
    return _TokenKey(auth.token_url, auth.client_id, auth.scope, auth.audience, digest)


def _parse_token(response: httpx.Response, where: str) -> tuple[str, float]:
    status = response.status_code
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if not 200 <= status < 300:
        detail = f"HTTP {status}"
        code = payload.get("error") if isinstance(payload, dict) else None
        if isinstance(code, str) and code.replace("_", "").isalnum() and len(code) <= 64:
            detail += f" ({code})"
        raise TokenError(f"{where} failed: {detail}", retryable=status == 429 or status >= 500)
    token = payload.get("access_token") if isinstance(payload, dict) else None
    if not isinstance(token, str) or not token:
        raise TokenError(f"{where} answered without an access_token", retryable=False)
    token_type = payload.get("token_type", "bearer")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise TokenError(f"{where} answered a token of type {token_type!r}", retryable=False)
    expires_in = payload.get("expires_in", DEFAULT_TOKEN_LIFETIME)
    try:
        lifetime = float(expires_in)
    except (TypeError, ValueError):
        lifetime = DEFAULT_TOKEN_LIFETIME
    if not math.isfinite(lifetime):
        lifetime = DEFAULT_TOKEN_LIFETIME
    return token, min(max(lifetime, 0.0), MAX_TOKEN_LIFETIME)
