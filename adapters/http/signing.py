"""Signed calls in the Standard Webhooks format (docs/api.md, "Events and signed calls").

A call carries `webhook-id`, `webhook-timestamp` (Unix seconds when sent) and
`webhook-signature`: `v1,` + base64 of HMAC-SHA256 over "{id}.{timestamp}.{body}", one
per configured secret, separated by spaces, so that a receiver holding any one of them
(old or new, during a rotation) verifies the call with any Standard Webhooks library.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret
# Shortest key accepted: 128 bits (Standard Webhooks suggests 24 to 64 bytes; shorter
# keys from elsewhere are common enough to allow, a few bytes are not).
MIN_KEY_BYTES = 16


class InvalidSigningSecret(ValueError):
    """A signing secret is not `whsec_` + base64 of at least 16 bytes. The message never
    contains the secret."""


def parse_signing_secrets(value: str) -> tuple[bytes, ...]:
    """The keys of a space-separated list of `whsec_…` secrets ("" or blank: none).
    Raises InvalidSigningSecret naming the position of a bad one, never its value."""
    keys = []
    for position, secret in enumerate(value.split(), start=1):
        where = f"secret {position}" if len(value.split()) > 1 else "the secret"
        if not secret.startswith(SECRET_PREFIX):
            raise InvalidSigningSecret(f"{where} does not start with {SECRET_PREFIX!r}")
        encoded = secret.removeprefix(SECRET_PREFIX)
        encoded += "=" * (-len(encoded) % 4)  # unpadded base64 is common, and fine
        try:
            key = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidSigningSecret(
                f"{where} is not {SECRET_PREFIX!r} followed by base64"
            ) from None
        if len(key) < MIN_KEY_BYTES:
            raise InvalidSigningSecret(
                f"{where} holds {len(key)} bytes; a key of at least {MIN_KEY_BYTES} is needed"
            )
        keys.append(key)
    return tuple(keys)


@dataclass(frozen=True, slots=True)
class Signer:
    """Signs calls with every key it holds; with none, signs nothing."""

    keys: tuple[bytes, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.keys)

    def __repr__(self) -> str:
        return f"Signer({len(self.keys)} keys)"

    def headers(self, webhook_id: str, timestamp: int, body: bytes) -> list[tuple[bytes, bytes]]:
        """The three Standard Webhooks headers of a call sending `body` at `timestamp`."""
        message = f"{webhook_id}.{timestamp}.".encode() + body
        signatures = " ".join(
            "v1," + base64.b64encode(hmac.new(key, message, hashlib.sha256).digest()).decode()
            for key in self.keys
        )
        return [
            (b"webhook-id", webhook_id.encode()),
            (b"webhook-timestamp", str(timestamp).encode()),
            (b"webhook-signature", signatures.encode()),
        ]


def signature_secrets(value: bytes | str | None) -> list[str]:
    """What of a `webhook-signature` value a target's answer must not echo into a run:
    the whole value and each signature in it. Anyone who reads it could replay the call
    while its timestamp is fresh, as a dry run's `***` says (docs/api.md, "Signed
    calls")."""
    if not value:
        return []
    text = value.decode() if isinstance(value, bytes) else value
    return [text, *(part.partition(",")[2] for part in text.split(" ") if "," in part)]
