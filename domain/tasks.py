"""The Task resource: what to call (an HTTP target) and when (a trigger)."""

from __future__ import annotations

import math
import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationInfo,
    field_validator,
    model_validator,
)

from domain.credential_headers import is_credential_header, refused_credential_header
from domain.names import (
    ENV_NAME_PATTERN,
    NAME_PATTERN,
    TAG_PATTERN,
    reserved_env_name,
    unreachable_name,
)
from domain.read_back import read_back
from domain.retention import MAX_HISTORY_LIMIT
from domain.triggers import Trigger
from domain.validation import NUL_MESSAGE, nul_at

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$")
# Headers the scheduler sets itself; a target may not override them.
RESERVED_HEADERS = frozenset(
    {
        "idempotency-key",
        "x-scheduler-task-id",
        "x-scheduler-run-id",
        "x-scheduler-scheduled-for",
        "content-length",
        "host",
        "transfer-encoding",
        "user-agent",  # imbi-scheduler/<version> on every call (docs/api.md)
        # Standard Webhooks signature headers, set when SCHEDULER_SIGNING_SECRET is.
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
    }
)

# Ten years: null is "however late"; a bound keeps the value in the stores' integer.
MAX_GRACE_SECONDS = 315_360_000

CatchUp = Literal["latest", "all"]
Overlap = Literal["skip", "buffer_one", "buffer_all", "replace"]


def _not_reserved(name: str, info: ValidationInfo) -> str:
    # A stored task that names one still loads: its runs fail, naming why (adapters/http/auth.py).
    if not read_back(info) and (why := reserved_env_name(name)) is not None:
        raise ValueError(f"{name} {why}")
    return name


EnvName = Annotated[
    str,
    Field(pattern=ENV_NAME_PATTERN, description="environment variable"),
    AfterValidator(_not_reserved),
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NoAuth(_Model):
    type: Literal["none"] = "none"


class BearerAuth(_Model):
    type: Literal["bearer"] = "bearer"
    token_env: EnvName


class BasicAuth(_Model):
    type: Literal["basic"] = "basic"
    username: str = Field(min_length=1, max_length=500)
    password_env: EnvName


class OAuth2ClientCredentials(_Model):
    type: Literal["oauth2_client_credentials"] = "oauth2_client_credentials"
    token_url: str
    client_id: str = Field(min_length=1, max_length=500)
    client_secret_env: EnvName
    scope: str | None = None
    audience: str | None = None
    client_auth: Literal["basic", "post"] = "basic"

    @field_validator("token_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return check_http_url(value)


Auth = Annotated[
    NoAuth | BearerAuth | BasicAuth | OAuth2ClientCredentials, Field(discriminator="type")
]


class RetryPolicy(_Model):
    max_attempts: int = Field(default=1, ge=1, le=10)
    backoff_seconds: float = Field(default=1, ge=0, le=3600)
    max_backoff_seconds: float = Field(default=60, ge=0, le=3600)

    def wait_before(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before `attempt` (2, 3, …): doubling from `backoff_seconds`,
        or the target's `Retry-After`, never beyond `max_backoff_seconds`."""
        wait = self.backoff_seconds * 2 ** (attempt - 2) if retry_after is None else retry_after
        return max(0.0, min(wait, self.max_backoff_seconds))

    def total_wait(self) -> float:
        """The longest all retry waits of one run can take."""
        return self.max_backoff_seconds * (self.max_attempts - 1)


def check_header_name(name: str) -> None:
    if not _HEADER_NAME.match(name):
        raise ValueError(f"{name!r} is not a valid header name")
    if name.lower() in RESERVED_HEADERS:
        raise ValueError(f"{name!r} is set by the scheduler and cannot be overridden")


def check_headers_env(
    value: dict[str, str], headers: dict[str, str], auth: object
) -> dict[str, str]:
    """Header names of `headers_env`: valid, not the scheduler's own, not also a plain
    header (which value would win?), and no Authorization beside an `auth` that sets it.
    `auth` is None when it failed validation itself."""
    plain = {name.lower() for name in headers}
    seen: set[str] = set()
    for name in value:
        check_header_name(name)
        lower = name.lower()
        if lower in plain:
            raise ValueError(f"{name!r} is also in headers")
        if lower in seen:
            raise ValueError(f"{name!r} is named twice (header names ignore case)")
        seen.add(lower)
        if lower == "authorization" and auth is not None and not isinstance(auth, NoAuth):
            raise ValueError(f"{name!r} is set by auth")
    return value


def check_http_url(value: str) -> str:
    """An http or https URL naming a host, with a valid port if any."""
    if value != value.strip():
        # urlsplit reads past it; the HTTP client would take the URL as a relative one.
        raise ValueError("must not begin or end with white space")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https"):
        raise ValueError("must be an http or https URL")
    if not parts.hostname:
        raise ValueError("must name a host")
    if parts.username is not None or parts.password is not None:
        # They would be sent as an Authorization header and kept in the clear.
        raise ValueError("must not carry credentials (user:password@): use auth")
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise ValueError(f"has a bad port: {exc}") from None
    return value


URL_MAX_LENGTH = 4096  # of a target's or a destination's url, stored or rendered

# Documents (in JSON Schema) what check_http_url enforces: an http(s) URL with a host.
_HTTP_URL_PATTERN = "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#]+"


def _checked_url(value: str, info: ValidationInfo) -> str:
    return value if read_back(info) else check_http_url(value)


# The URL a target or a notify destination calls, checked by check_http_url (when written).
HttpUrlText = Annotated[
    str,
    Field(max_length=URL_MAX_LENGTH, json_schema_extra={"pattern": _HTTP_URL_PATTERN}),
    AfterValidator(_checked_url),
]


class HttpTarget(_Model):
    url: HttpUrlText
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="header name to value, sent as written; not Authorization or "
        "Proxy-Authorization (a credential is never stored: see headers_env and auth)",
    )
    body: JsonValue = None
    timeout_seconds: float = Field(default=30, gt=0, le=3600)
    auth: Auth = Field(default_factory=NoAuth)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    template: bool = False
    headers_env: dict[str, EnvName] = Field(
        default_factory=dict,
        description="header name to the name of an environment variable of the scheduler "
        "that holds its value, read when the call is made (never stored or shown)",
    )

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if read_back(info):
            return value
        seen: set[str] = set()
        for name, header in value.items():
            check_header_name(name)
            lower = name.lower()
            if lower in seen:
                raise ValueError(f"{name!r} is named twice (header names ignore case)")
            seen.add(lower)
            if is_credential_header(name):
                raise ValueError(refused_credential_header(name))
            if "\r" in header or "\n" in header:
                raise ValueError(f"the value of {name!r} contains a line break")
        return value

    @field_validator("headers_env")
    @classmethod
    def _headers_env(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if read_back(info):
            return value
        return check_headers_env(value, info.data.get("headers", {}), info.data.get("auth"))

    @field_validator("body")
    @classmethod
    def _finite_numbers(cls, value: JsonValue, info: ValidationInfo) -> JsonValue:
        # JSON parsers read 1e400 as infinity, which no JSON document (nor the stored
        # jsonb, nor the call's body) can carry.
        if not read_back(info) and not _finite(value):
            raise ValueError(
                "holds a number too large for JSON (1e400 reads as infinity): send it as a string"
            )
        return value


def _finite(value: JsonValue) -> bool:
    """No float in `value` is infinite or NaN."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    if isinstance(value, list):
        return all(_finite(item) for item in value)
    return True


class EventType(StrEnum):
    """What an event tells (docs/events.md)."""

    RUN_FAILED = "run.failed"
    RUN_MISSED = "run.missed"
    RUN_SKIPPED = "run.skipped"
    TASK_AUTO_PAUSED = "task.auto_paused"
    TASK_RECOVERED = "task.recovered"
    BACKFILL_FINISHED = "backfill.finished"


class Notify(_Model):
    """Where a task's events go, and which (docs/api.md, "Events"): the task field
    `notify`. Secrets stay names of environment variables, as for targets."""

    url: HttpUrlText
    events: list[EventType] = Field(
        default_factory=lambda: list(EventType), min_length=1, description="default: all"
    )
    auth: Auth = Field(default_factory=NoAuth)
    headers_env: dict[str, EnvName] = Field(
        default_factory=dict,
        description="header name to the name of an environment variable of the scheduler",
    )

    @field_validator("events")
    @classmethod
    def _unique(cls, value: list[EventType]) -> list[EventType]:
        if len(set(value)) != len(value):
            raise ValueError("events must not repeat")
        return value

    @field_validator("headers_env")
    @classmethod
    def _headers_env(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        return check_headers_env(value, {}, info.data.get("auth"))


class TaskSpec(_Model):
    """The writable fields of a task, as a client sends them."""

    name: str = Field(pattern=NAME_PATTERN)
    description: str | None = Field(default=None, max_length=10_000)
    trigger: Trigger
    target: HttpTarget
    enabled: bool = True
    tags: list[Annotated[str, Field(pattern=TAG_PATTERN)]] = Field(
        default_factory=list, max_length=20
    )
    misfire_grace_seconds: int | None = Field(default=60, ge=0, le=MAX_GRACE_SECONDS)
    max_running_instances: int = Field(default=1, ge=1, le=10_000)
    jitter_seconds: int = Field(default=0, ge=0, le=86_400)
    pause_after_failures: int | None = Field(default=None, ge=1, le=10_000)
    # Occurrence policies (docs/policies.md): the defaults are the one rule there was
    # before them, a backlog folded into its latest occurrence, skipped at the limit.
    catch_up: CatchUp = "latest"
    max_catch_up: int = Field(default=100, ge=1, le=10_000)
    overlap: Overlap = "skip"
    notify: Notify | None = Field(
        default=None, description="where this task's events go; null: SCHEDULER_EVENTS_URL"
    )
    history_limit: int | None = Field(
        default=None,
        ge=1,
        le=MAX_HISTORY_LIMIT,
        description="keep the newest N finished runs of this task; null: only the age limit",
    )

    @field_validator("name")
    @classmethod
    def _reachable(cls, value: str) -> str:
        # In a task path `{id}` is an id or a name, the id first: a name that reads as
        # an id, or "." / "..", would name a task no path reaches. Only a spec is checked
        # (a stored task's name was checked when it was written, or predates the rule).
        if cls is TaskSpec and (problem := unreachable_name(value)):
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _no_nul(self) -> TaskSpec:
        # The HTTP layer names the field first; this keeps every other way in honest.
        # A Task is made from a spec checked here or from a stored row (no store holds
        # U+0000): checking it again cost the claim path a JSON dump of every row. An
        # after validator, not a before one: a before validator would have pydantic
        # hand the whole spec over as Python objects, and a request's strict JSON
        # validation (entrypoints/http/body.py) would then refuse RFC 3339 strings.
        if type(self) is not TaskSpec or "\\u0000" not in self.model_dump_json():
            return self
        where = nul_at(self.model_dump(mode="json"))
        if where is not None:
            raise ValueError(f"{where} {NUL_MESSAGE}")
        return self

    @field_validator("tags")
    @classmethod
    def _unique_tags(cls, value: list[str]) -> list[str]:
        # A field validator, so that the error names `tags`, not the whole body.
        if len(set(value)) != len(value):
            raise ValueError("tags must not repeat")
        return value


class Task(TaskSpec):
    """A stored task. `next_fire_at` is the next un-jittered occurrence (internal);
    `next_run_at` adds its jitter: what the claim query orders by."""

    id: UUID
    consecutive_failures: int = 0
    # Whether the last scheduled run that counted failed. Unlike consecutive_failures,
    # a resume keeps it: the first success after an automatic pause is a recovery too.
    failing: bool = False
    next_fire_at: datetime | None = None
    next_run_at: datetime | None = None
    last_run_at: datetime | None = None
    claimed_through: datetime | None = None  # latest occurrence claimed (internal)
    created_at: datetime
    updated_at: datetime
    version: int = 1

    @classmethod
    def of_spec(cls, spec: TaskSpec, **fields: Any) -> Task:
        """The task made of a checked `spec` and what the scheduler adds (`fields`: its
        id, instants, completed trigger). Not validated again: the spec was, the added
        values are the scheduler's own, and the spec's parts are immutable, so shared
        (validating a new task field by field again cost a create a third of its time)."""
        values = {name: getattr(spec, name) for name in TaskSpec.model_fields} | fields
        return cls.model_construct(**values)

    def spec(self) -> TaskSpec:
        """The writable fields of this task. Not validated again: a stored task was
        validated as a spec when written, and its parts are immutable, so they are
        shared (a sync of 10,000 unchanged tasks compares 10,000 specs)."""
        return TaskSpec.model_construct(
            _fields_set=set(self.model_fields_set) & set(TaskSpec.model_fields),
            **{name: getattr(self, name) for name in TaskSpec.model_fields},
        )
