"""The HTTP executor: performs one run of a task's target (docs/api.md, "Outbound calls")."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Callable, Mapping
from datetime import datetime

import httpx

from adapters.clock import SystemClock
from adapters.http.attempts import (
    Answer,
    CallResult,
    log_attempt,
    log_result,
    logger,
    read_answer,
    send_through_client,
)
from adapters.http.auth import (
    REDACTED,
    Credentials,
    MissingSecret,
    OAuth2Tokens,
    TokenError,
    credentials_for,
    literal_credentials,
    redacted_header,
)
from adapters.http.failures import describe, retry_after_seconds, scrub
from adapters.http.guard import OutboundGuard, Resolver
from adapters.http.heads import CachedHead, Heads
from adapters.http.host_checks import HostChecks
from adapters.http.requests import (
    CookielessClient,
    PreparedRequest,
    add_headers,
    body_bytes,
    build_request,
    call_headers,
    header_pairs,
    lenient_url,
    set_header,
    template_context,
)
from adapters.http.settings import HttpExecutorSettings
from adapters.http.signing import signature_secrets
from adapters.http.template_workers import TemplateWorkers
from adapters.http.templates import TemplateFailed, Templates, rfc3339
from adapters.http.transport import GuardedTransport
from application.deadlines import TooLateToSend, deadline
from application.ports import CallProgress, Clock, RenderedRequest
from domain.errors import InvalidRequest
from domain.events import DELIVERY_TIMEOUT_SECONDS, Delivery, Outgoing
from domain.runs import Run, RunOutcome, RunStatus, idempotency_key
from domain.tasks import HttpTarget, Notify, OAuth2ClientCredentials, Task

_SECRET_HEADERS = (b"Authorization", b"Proxy-Authorization")


# The per-step limits of a call the attempt's own limit covers (see `_send_cached`).
_NO_STEP_LIMITS: dict[str, float] = {}


class HttpExecutor:
    """Calls HTTP targets through one pooled httpx client behind the outbound guard.

    Secrets are read from `environ` (default: `os.environ`, read at call time) when a
    call is made and never appear in outcomes or logs. `resolver` replaces DNS (tests);
    `clock` stamps `started_at`, `finished_at` and the templates' `now`.
    """

    def __init__(
        self,
        settings: HttpExecutorSettings | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        resolver: Resolver | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._settings = settings or HttpExecutorSettings()
        self._environ = environ
        self._guard = OutboundGuard(
            self._settings.allow,
            self._settings.deny,
            resolver=resolver,
            cache_seconds=self._settings.dns_cache_seconds,
        )
        self._hosts = HostChecks(self._guard)
        self._clock = clock or SystemClock()
        self._templates = Templates()  # checks templates; renders are the workers'
        self._renders = TemplateWorkers()
        # Dry runs (a read-only token may ask for them) render apart: they never hold
        # the workers scheduled runs wait for.
        self._previews = TemplateWorkers(workers=1)
        self._client: httpx.AsyncClient | None = None
        self._transport: GuardedTransport | None = None  # the client's
        self._tokens = OAuth2Tokens(self._http)
        self._heads = Heads()

    def check(self, target: HttpTarget, notify: Notify | None = None) -> None:
        if target.template:
            self._templates.check(target)
        self._hosts.check("target.url", target.url, templated=target.template)
        if isinstance(target.auth, OAuth2ClientCredentials):
            self._hosts.check("target.auth.token_url", target.auth.token_url)
        if notify is not None:
            self._hosts.check("notify.url", notify.url)
            if isinstance(notify.auth, OAuth2ClientCredentials):
                self._hosts.check("notify.auth.token_url", notify.auth.token_url)

    async def deliver(self, event: Outgoing) -> Delivery:
        """One attempt to send `event` to its destination: its body, a signed JSON POST,
        through the outbound guard, with the destination's auth and headers_env. Never
        raises for a failed attempt."""
        destination = event.destination
        try:
            credentials = credentials_for(
                destination.auth, self._env(), destination.headers_env, owner="notify"
            )
        except MissingSecret as exc:
            return Delivery(delivered=False, error=str(exc))
        key = str(event.id)
        headers = {"Idempotency-Key": key, "X-Scheduler-Task-Id": str(event.task_id)}
        if not self._settings.signer:  # a signed event carries it with its signature
            headers["webhook-id"] = key  # what a receiver dedupes on (docs/events.md)
        request = PreparedRequest(
            "POST",
            destination.url,
            headers,
            None,
            webhook_id=key,
            content=event.body,
            fixed={},
            own=headers,
        )
        result = await self._attempt(DELIVERY_TIMEOUT_SECONDS, request, credentials)
        if result.status == 401 and credentials.oauth2_secret is not None:
            self._tokens.drop(credentials)  # the next attempt asks for a new token
        return Delivery(delivered=result.succeeded, http_status=result.status, error=result.error)

    async def execute(
        self,
        task: Task,
        run: Run,
        last_run_at: datetime | None,
        progress: CallProgress | None = None,
    ) -> RunOutcome:
        started = self._clock.now()
        try:
            request = await self._prepare(task, run, last_run_at, started, self._renders)
            credentials = credentials_for(task.target.auth, self._env(), task.target.headers_env)
            credentials.secrets += literal_credentials(task.target.headers)
        except (TemplateFailed, MissingSecret) as exc:
            log_attempt(task, run, 0, logging.WARNING, "not called: %s", exc)
            return RunOutcome(
                status=RunStatus.FAILED,
                error=str(exc),
                started_at=started,
                finished_at=self._clock.now(),
            )
        if progress is None:
            progress = CallProgress()
        calls, result = await self._call(task, run, request, credentials, progress)
        error = result.error
        if error is not None and calls > 1:
            error = f"{error} (after {calls} attempts)"
        return RunOutcome(
            status=RunStatus.SUCCEEDED if result.succeeded else RunStatus.FAILED,
            attempts=calls,
            http_status=result.status,
            response_excerpt=result.excerpt,
            error=error,
            started_at=started,
            finished_at=self._clock.now(),
        )

    async def render(
        self, task: Task, run: Run, last_run_at: datetime | None, *, redact: bool
    ) -> RenderedRequest:
        """Raises InvalidRequest for a template that fails to render or, unredacted, a
        secret that is not set; unredacted OAuth2 fetches a token (TokenError)."""
        try:
            now = self._clock.now()
            request = await self._prepare(task, run, last_run_at, now, self._previews)
        except TemplateFailed as exc:
            raise InvalidRequest(exc.field, str(exc)) from None
        headers = header_pairs(request.headers)
        target = task.target
        if redact:
            for header in target.headers_env:
                set_header(headers, header.encode(), REDACTED.encode())
            for name in _SECRET_HEADERS:
                set_header(headers, name, REDACTED.encode(), only_if_present=True)
            shown = redacted_header(target.auth)
            if shown is not None:
                set_header(headers, b"Authorization", shown.encode())
        else:
            try:
                credentials = credentials_for(target.auth, self._env(), target.headers_env)
            except MissingSecret as exc:
                raise InvalidRequest(exc.field, str(exc)) from None
            add_headers(headers, credentials.headers)
            value = await self._authorization(credentials, target.timeout_seconds)
            if value is not None:
                set_header(headers, b"Authorization", value.encode())
        built = build_request(self._http(), request, headers, target.timeout_seconds, self._sign())
        shown_headers = [(name.decode(), value.decode()) for name, value in built.headers.raw]
        if redact:
            # A signature is no secret, but a valid one lets whoever reads the dry run
            # replay the call to the target until its timestamp grows old.
            shown_headers = [
                (name, REDACTED if name == "webhook-signature" else value)
                for name, value in shown_headers
            ]
        return RenderedRequest(
            method=request.method, url=request.url, headers=dict(shown_headers), body=request.body
        )

    async def close(self) -> None:
        await self._renders.close()
        await self._previews.close()
        if self._client is not None:
            client, self._client, self._transport = self._client, None, None
            await client.aclose()

    # -- one run ------------------------------------------------------------------

    async def _call(
        self,
        task: Task,
        run: Run,
        request: PreparedRequest,
        credentials: Credentials,
        progress: CallProgress,
    ) -> tuple[int, CallResult]:
        """Call until success, a final failure or the retry policy's last attempt;
        return the number of calls and how the last one ended. `progress` is told of
        each call as it begins (before its token, connection or request: docs/api.md,
        "Run") and of each answer as it ends, for a cancel that comes before the end."""
        policy = task.target.retry
        calls, attempt, refreshed = 0, 1, False
        while True:
            calls += 1
            progress.attempts = calls
            started = time.monotonic()
            try:
                result = await self._attempt(task.target.timeout_seconds, request, credentials)
            except TooLateToSend:
                progress.attempts = calls - 1  # nothing of it was sent
                raise
            progress.http_status, progress.response_excerpt = result.status, result.excerpt
            log_result(task, run, calls, result, time.monotonic() - started)
            if result.status == 401 and credentials.oauth2_secret is not None and not refreshed:
                # The token may have been revoked or expired early: one more call with a
                # fresh token, outside the retry budget.
                refreshed = True
                self._tokens.drop(credentials)
                continue
            if not result.retryable or attempt >= policy.max_attempts:
                return calls, result
            attempt += 1
            wait = policy.wait_before(attempt, result.retry_after)
            log_attempt(task, run, calls, logging.INFO, "retrying in %gs", wait)
            await asyncio.sleep(wait)

    async def _attempt(
        self, seconds: float, request: PreparedRequest, credentials: Credentials
    ) -> CallResult:
        timeout = seconds
        limit = self._settings.response_excerpt_bytes
        try:
            # Not asyncio.timeout: an answer already in the socket when the limit
            # expires (a process frozen meanwhile) is read first.
            async with deadline(timeout):
                authorization = await self._authorization(credentials, timeout)
                client = self._http()
                assert self._transport is not None
                head, calls = None, []
                if request.fixed is not None:  # a plain target: its head may be cached
                    calls = call_headers(request.own, credentials.headers, authorization)
                    head = self._heads.get(client.headers, request, calls)
                if head is not None:
                    answer = await self._send_cached(head, request, calls, limit, credentials)
                else:
                    headers = call_headers(request.headers, credentials.headers, authorization)
                    built = build_request(client, request, headers, timeout, self._sign())
                    signature = built.headers.get("webhook-signature")
                    secrets = credentials.secrets + signature_secrets(signature)
                    if built.url.userinfo:
                        # httpx turns a URL's user:password into Basic auth: its own path.
                        answer = await send_through_client(client, built, limit, secrets)
                    else:
                        exchanged = await self._transport.exchange(built)
                        answer = await read_answer(exchanged, built, limit, secrets)
        except TokenError as exc:
            return CallResult(error=scrub(str(exc), credentials.secrets), retryable=exc.retryable)
        except TooLateToSend:
            raise  # not a failed attempt: the run's limit stops the call (its engine says)
        except Exception as exc:
            failure = describe(exc, lenient_url(request.url), timeout)
            if failure.message.startswith("unexpected error"):
                logger.error("unexpected error calling a target: %s", type(exc).__name__)
            message = scrub(failure.message, credentials.secrets)
            return CallResult(error=message, retryable=failure.retryable)
        status, reason, retry_after_header, excerpt = answer
        if 200 <= status < 300:
            return CallResult(status=status, excerpt=excerpt)
        retryable = status == 429 or status >= 500
        retry_after = retry_after_seconds(retry_after_header)
        return CallResult(
            status=status,
            excerpt=excerpt,
            error=f"HTTP {status} {reason}".rstrip(),
            retryable=retryable,
            retry_after=retry_after if retryable else None,
        )

    async def _send_cached(
        self,
        cached: CachedHead,
        request: PreparedRequest,
        calls: list[tuple[bytes, bytes]],
        limit: int,
        credentials: Credentials,
    ) -> Answer:
        """`_send` for a request with a cached head (adapters/http/heads.py)."""
        content = body_bytes(request)
        sign = self._sign()
        signed = [] if sign is None else sign(request.webhook_id, content)
        make = functools.partial(cached.wire, calls, content, signed)
        assert self._transport is not None
        # No limit per step: the attempt's own (`_attempt`) began before any of them and
        # is as long, so it always ends first; a timer per read cost each call a
        # timer handle and its place in the event loop's heap, and never fired.
        exchanged = await self._transport.exchange_wire(cached.key, make, _NO_STEP_LIMITS)
        secrets = credentials.secrets + signature_secrets(dict(signed).get(b"webhook-signature"))
        return await read_answer(exchanged, None, limit, secrets)

    async def _authorization(self, credentials: Credentials, timeout_seconds: float) -> str | None:
        if credentials.header is not None:
            return credentials.header
        if credentials.oauth2_secret is not None:
            return await self._tokens.authorization(credentials, timeout_seconds)
        return None

    # -- building requests --------------------------------------------------------

    async def _prepare(
        self,
        task: Task,
        run: Run,
        last_run_at: datetime | None,
        now: datetime,
        renders: TemplateWorkers,
    ) -> PreparedRequest:
        target = task.target
        if target.template:
            url, headers, body = await renders.render(
                target, template_context(task, run, last_run_at, now)
            )
        else:
            url, headers, body = target.url, dict(target.headers), target.body
        key = idempotency_key(run)
        own = {
            "Idempotency-Key": key,
            "X-Scheduler-Task-Id": str(task.id),
            "X-Scheduler-Run-Id": str(run.id),
            "X-Scheduler-Scheduled-For": rfc3339(run.scheduled_for),
        }
        headers |= own
        fixed = None if target.template else target.headers
        return PreparedRequest(
            target.method, url, headers, body, webhook_id=key, fixed=fixed, own=own
        )

    def _sign(self) -> Callable[[str, bytes], list[tuple[bytes, bytes]]] | None:
        """The signer's headers for a body sent now (each attempt stamped anew)."""
        signer = self._settings.signer
        if not signer:
            return None
        return lambda webhook_id, content: signer.headers(
            webhook_id, int(self._clock.now().timestamp()), content
        )

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._transport = GuardedTransport(
                self._guard, max_connections=self._settings.max_connections
            )
            self._client = CookielessClient(
                transport=self._transport,
                headers={"User-Agent": self._settings.user_agent},
                # No proxies or .netrc from the environment; redirects are answers.
                trust_env=False,
                follow_redirects=False,
            )
        return self._client

    def _env(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ
