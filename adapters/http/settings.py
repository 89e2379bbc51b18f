"""Settings of the HTTP executor, and the version it names in its User-Agent."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from adapters.http.signing import Signer
from domain.runs import RESPONSE_EXCERPT_LIMIT


def package_version() -> str:
    """The installed version of imbi-scheduler, or the source tree's when not installed."""
    try:
        return metadata.version("imbi-scheduler")
    except metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


@dataclass(frozen=True)
class HttpExecutorSettings:
    """How the executor calls targets.

    `allow` and `deny` hold host names or CIDR networks (a bare address is a /32 or
    /128): the outbound guard's lists (docs/api.md, "The outbound guard"). `max_connections`
    bounds the connections open at once (idle kept-alive ones included);
    `dns_cache_seconds` is how long what a host name resolved to is reused (0: never),
    its addresses checked by the guard at every use. `signer` signs every call
    (Standard Webhooks); by default nothing is signed.
    """

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    response_excerpt_bytes: int = RESPONSE_EXCERPT_LIMIT
    max_connections: int = 200
    dns_cache_seconds: float = 10.0
    user_agent: str = field(default_factory=lambda: f"imbi-scheduler/{package_version()}")
    signer: Signer = field(default_factory=Signer, repr=False)

    def __post_init__(self) -> None:
        if not 0 <= self.response_excerpt_bytes <= RESPONSE_EXCERPT_LIMIT:
            raise ValueError(f"response_excerpt_bytes must be within 0..{RESPONSE_EXCERPT_LIMIT}")
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        if not 0 <= self.dns_cache_seconds <= 300:
            raise ValueError("dns_cache_seconds must be within 0..300")
