"""Settings from the environment (`SCHEDULER_*`), validated once at start."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

import psycopg
from psycopg.conninfo import conninfo_to_dict
from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from adapters.http.signing import parse_signing_secrets
from application.engine_settings import default_replica
from domain.tasks import check_http_url

ENV_PREFIX = "SCHEDULER_"
READ_ONLY_SUFFIX = ":read"
# A token's label (`label=token`), the actor that task history records.
_LABEL = re.compile(r"^[A-Za-z0-9._@-]{1,100}$")
# Settings whose value must never be echoed back in an error message.
# The events URL may hold a password (refused, but not to be echoed while refusing it).
_SECRET_FIELDS = frozenset({"database_url", "api_tokens", "signing_secret", "events_url"})


# A host name as the outbound guard compares them (letters, digits, '-', '_', dots).
_HOST = re.compile(
    r"^(?=.{1,253}\.?$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_-]{1,63})*\.?$"
)


def _is_address(item: str) -> bool:
    try:
        ipaddress.ip_address(item.strip("[]"))
    except ValueError:
        return False
    return True


class ConfigurationError(Exception):
    """The process cannot start as configured; the message names the variable."""


class Access(StrEnum):
    READ = "read"
    WRITE = "write"


class Settings(BaseSettings):
    """Every knob of `imbi-scheduler serve`, read from `SCHEDULER_<FIELD>`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="ignore",
        frozen=True,
        populate_by_name=True,
        allow_inf_nan=False,  # "should be a finite number", not "less than 3600" for nan
    )

    database_url: str | None = Field(
        default=None, repr=False, description="PostgreSQL URL; unset means the in-memory store"
    )
    pool_size: int = Field(default=10, ge=1, le=1000, description="connections per process")
    database_answer_timeout: float = Field(
        default=30.0,
        ge=1,
        le=86_400,
        description="seconds a connection may wait on a database that answers nothing (its"
        " host still taking packets) before it is shut: what waited on it answers 503",
    )
    database_wait: float = Field(
        default=30.0,
        ge=0,
        le=86_400,
        description="seconds serve and init-db keep trying at start while PostgreSQL cannot "
        "be reached (0: not at all)",
    )
    db_schema: str = Field(
        default="scheduler",
        validation_alias="SCHEDULER_SCHEMA",
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        description="PostgreSQL schema holding the scheduler's tables",
    )
    batch_size: int = Field(default=100, ge=1, le=10_000, description="runs per claim")
    max_poll_interval: float = Field(
        default=5.0, gt=0, le=3600, description="seconds the loop sleeps at most"
    )
    max_concurrent_runs: int = Field(default=100, ge=1, le=100_000)
    drain_timeout: float = Field(default=30.0, ge=0, le=3600)
    stalled_transaction_timeout: float = Field(
        default=30.0,
        ge=0,
        le=86_400,
        description="seconds after which a transaction left open by a stopped replica is "
        "ended (0: never)",
    )
    run_retention_days: float = Field(default=30, gt=0, le=36_500, description="at most 100 years")
    api_tokens: str = Field(default="", repr=False)
    signing_secret: str = Field(
        default="",
        repr=False,
        description="space-separated whsec_ secrets signing every call (Standard Webhooks)",
    )
    events_url: str | None = Field(
        default=None,
        max_length=4096,
        description="where the events of every task without notify go; unset: nowhere",
    )
    events_poll_interval: float = Field(
        default=1.0, gt=0, le=3600, description="seconds the event sender waits when idle"
    )
    allow_anonymous: bool = False
    auth_failure_limit: int = Field(
        default=10,
        ge=0,
        le=1_000_000,
        description="unknown tokens per client address per window (0: off)",
    )
    auth_failure_window: float = Field(
        default=60.0,
        gt=0,
        le=86_400,
        description="seconds the unknown tokens of an address are counted",
    )
    host: str = Field(default="127.0.0.1", min_length=1)
    port: int = Field(default=8005, ge=0, le=65535)
    engine: Literal["native", "apscheduler"] = "native"
    target_allow: str = ""
    target_deny: str = ""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    log_format: Literal["json", "text"] = "text"
    replica: str = Field(default_factory=default_replica, min_length=1, max_length=200)

    @field_validator("log_level", "engine", "log_format", mode="before")
    @classmethod
    def _case_insensitive(cls, value: Any, info: Any) -> Any:
        if not isinstance(value, str):
            return value
        return value.upper() if info.field_name == "log_level" else value.lower()

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            return None
        url = value is not None and value.startswith(("postgresql://", "postgres://"))
        # A libpq keyword/value string ("host=db dbname=scheduler") is fine too.
        if value is not None and not url and "=" not in value:
            raise ValueError("must be a postgresql:// URL or a libpq connection string")
        if value is not None and url and _ambiguous_user_info(value):
            # libpq would split it elsewhere than the password ends, and show the rest
            # of the password back as a host, a port or a database in its errors.
            raise ValueError(
                "holds an '@' that does not end its user info: a password with '@', '/', "
                "'?' or '#' in it must be percent-encoded (%40, %2F, %3F, %23)"
            )
        if value is not None:
            try:  # libpq's own parse: an unknown parameter is named here, not at connect
                params = conninfo_to_dict(value)
            except psycopg.ProgrammingError as exc:
                reason = without_password(str(exc), value)
                raise ValueError(f"is not a connection string libpq reads: {reason}") from None
            _check_connection_values(params)
        return value

    @field_validator("events_url")
    @classmethod
    def _events_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return check_http_url(value.strip())

    @field_validator("api_tokens")
    @classmethod
    def _tokens(cls, value: str) -> str:
        parse_tokens(value)
        return value

    @field_validator("signing_secret")
    @classmethod
    def _signing_secret(cls, value: str) -> str:
        parse_signing_secrets(value)  # its errors never contain the secret
        return value

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        if not _HOST.match(value) and not _is_address(value):
            raise ValueError("is neither a host name nor an address")
        return value

    @field_validator("target_allow", "target_deny")
    @classmethod
    def _targets(cls, value: str) -> str:
        for item in split_list(value):
            if "/" in item:
                try:
                    ipaddress.ip_network(item, strict=False)
                except ValueError:
                    raise ValueError(f"{item!r} is not a CIDR network") from None
            elif not _HOST.match(item) and not _is_address(item):
                raise ValueError(f"{item!r} is neither a host name, an address nor a network")
        return value

    @property
    def tokens(self) -> dict[str, Access]:
        """Each configured API token and what it may do."""
        return parse_tokens(self.api_tokens)

    @property
    def grants(self) -> dict[str, Grant]:
        """Each configured API token, what it may do and its label."""
        return parse_grants(self.api_tokens)

    @property
    def store_kind(self) -> Literal["memory", "postgres"]:
        return "postgres" if self.database_url else "memory"

    @property
    def listens_on_loopback(self) -> bool:
        return is_loopback(self.host)

    def check_exposure(self) -> None:
        """Refuse a listener beyond loopback that nobody has to authenticate to.

        Raises ConfigurationError saying how to configure tokens.
        """
        if self.tokens or self.allow_anonymous or self.listens_on_loopback:
            return
        raise ConfigurationError(
            f"refusing to listen on {self.host} without API tokens: anyone who can reach it "
            "could create tasks that call any address. Set SCHEDULER_API_TOKENS to a "
            "comma-separated list of tokens (a token ending in ':read' is read-only, and "
            "'label=token' names who uses it, e.g. "
            "SCHEDULER_API_TOKENS='ops=s3cret-admin,s3cret-viewer:read'), or listen on "
            "127.0.0.1, "
            "or set SCHEDULER_ALLOW_ANONYMOUS=true to accept unauthenticated requests."
        )


def split_list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


@dataclass(frozen=True, slots=True)
class Grant:
    """What a configured token may do, and the label it acts under (history's actor)."""

    access: Access
    label: str | None = None


def parse_grants(value: str) -> dict[str, Grant]:
    """Each token of `SCHEDULER_API_TOKENS`: `[label=]token[:read]`, comma-separated.

    The label is the part before the first `=` when it is a plain name and the token
    after it does not start with `=` (so a base64 token ending in `==` stays whole).
    """
    grants: dict[str, Grant] = {}
    for item in split_list(value):
        access = Access.WRITE
        if item.endswith(READ_ONLY_SUFFIX):
            item, access = item.removesuffix(READ_ONLY_SUFFIX), Access.READ
        label = None
        name, sep, rest = item.partition("=")
        if sep and rest and not rest.startswith("=") and _LABEL.match(name):
            label, item = name, rest
        elif sep and not rest and _LABEL.match(name):
            # `ops=${OPS_TOKEN}` with the variable unset: read whole, "ops=" would be a
            # token anyone could guess.
            raise ValueError(
                "a token is empty after its label (is the variable in 'label=$TOKEN' "
                "unset?); a token that itself ends in one '=' is written after a label, "
                "'name=token'"
            )
        if not item or any(ch.isspace() for ch in item):
            raise ValueError("each token must be non-empty and contain no spaces")
        known = grants.get(item)
        if known is not None and known.access is not access:
            raise ValueError("a token is listed both read-only and read-write")
        if known is not None and known.label != label:
            raise ValueError("a token is listed under two labels")
        grants[item] = Grant(access, label)
    return grants


# libpq parses these values only when it connects: a typo would pass for an outage.
_INTEGER_PARAMETERS = (
    "port",
    "connect_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
)
_SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


def _check_connection_values(params: dict[str, Any]) -> None:
    for name in _INTEGER_PARAMETERS:
        given = params.get(name)
        if given is None:
            continue
        # A port per host, comma-separated, when the URL names several hosts.
        for part in str(given).split(",") if name == "port" else [str(given)]:
            if part.strip() and not part.strip().isdigit():
                raise ValueError(f"{name} must be a whole number of at least 0 (got {part!r})")
    sslmode = params.get("sslmode")
    if sslmode is not None and sslmode not in _SSL_MODES:
        raise ValueError(f"sslmode must be one of {', '.join(_SSL_MODES)} (got {sslmode!r})")


def _ambiguous_user_info(url: str) -> bool:
    """Whether a postgresql:// URL has more than one '@' before its path, or an '@' past
    it: user info that libpq and a reader would split in different places."""
    rest = url.split("://", 1)[1]
    authority, *after = re.split(r"[/?#]", rest, maxsplit=1)
    return authority.count("@") > 1 or ("@" in after[0] if after else False)


def without_password(message: str, conninfo: str) -> str:
    """libpq's `message` about `conninfo` with the password it holds (as a URL's user
    info, a `password=` keyword or query parameter) and any quoted piece of it starred:
    a password with a stray `%` is quoted whole by "invalid percent-encoded token"."""
    secrets = [
        *(m.group(1) for m in re.finditer(r"^[A-Za-z]+://[^:/?#@]*:([^/?#]*)@", conninfo)),
        *(m.group(1) for m in re.finditer(r"[?&]password=([^&#]*)", conninfo)),
        *(m.group(1).strip("'") for m in re.finditer(r"password\s*=\s*('[^']*'?|\S+)", conninfo)),
    ]
    secrets = [secret for secret in secrets if secret]
    for quoted in re.findall(r'"([^"]+)"', message):
        if any(quoted in secret for secret in secrets):
            message = message.replace(f'"{quoted}"', '"***"')
    for secret in sorted(secrets, key=len, reverse=True):
        message = message.replace(secret, "***")
    return message


def parse_tokens(value: str) -> dict[str, Access]:
    return {token: grant.access for token, grant in parse_grants(value).items()}


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def env_name(field: str) -> str:
    """The environment variable that sets `field` of `Settings`."""
    info = Settings.model_fields.get(field)
    if info is not None and isinstance(info.validation_alias, str):
        return info.validation_alias
    if field.upper().startswith(ENV_PREFIX):
        return field.upper()
    return ENV_PREFIX + field.upper()


def load_settings(**overrides: Any) -> Settings:
    """Read the environment (`overrides` win). Raises ConfigurationError naming each bad
    variable, without echoing secret values."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigurationError(describe(exc)) from None


def describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors(include_url=False):
        field = str(error["loc"][0]) if error["loc"] else "settings"
        name = env_name(_field_of(field))
        message = error["msg"].removeprefix("Value error, ")
        if _field_of(field) not in _SECRET_FIELDS and "input" in error:
            message += f" (got {error['input']!r})"
        lines.append(f"{name}: {message}")
    return "invalid settings: " + "; ".join(lines)


def _field_of(loc: str) -> str:
    for name, info in Settings.model_fields.items():
        if loc in (name, info.validation_alias):
            return name
    return loc
