"""Headers whose value is a credential. A task may not write one in `target.headers`
(it would be stored and answered in the clear): it names the environment variable that
holds it (`headers_env`) or uses `auth`. Tasks written before that rule may still hold
one; every answer and page shows its value as `***`, and run excerpts leave it out."""

from __future__ import annotations

from typing import Any

CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization"})
REDACTED = "***"


def is_credential_header(name: str) -> bool:
    return name.lower() in CREDENTIAL_HEADERS


def refused_credential_header(name: str) -> str:
    """Why a task may not write the header `name` literally."""
    return (
        f"{name!r} carries a credential, which a task never stores: name the environment"
        f' variable that holds it in headers_env ({{"{name}": "VARIABLE"}}) or use auth'
    )


def redacted_headers(headers: dict[str, str]) -> dict[str, str]:
    """`headers` with each credential's value as `***` (the same dict when it has none)."""
    if not any(is_credential_header(name) for name in headers):
        return headers
    return {name: REDACTED if is_credential_header(name) else v for name, v in headers.items()}


def redacted_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """A task's fields (as JSON) with a credential header of its target as `***`."""
    target = fields.get("target")
    if not isinstance(target, dict) or not isinstance(target.get("headers"), dict):
        return fields
    headers = redacted_headers(target["headers"])
    if headers is target["headers"]:
        return fields
    return {**fields, "target": {**target, "headers": headers}}
