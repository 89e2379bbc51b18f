"""Console sessions with API tokens configured: a signed cookie that names the token a
person logged in with, never the token itself.

The cookie is `<token id>.<expiry>.<nonce>.<signature>`: the token id is the first 16
bytes of the token's SHA-256 (it reveals nothing of the token), the expiry Unix seconds
`SESSION_SECONDS` after the login, the nonce random per login, the signature an HMAC of
the rest under a key derived from every configured token. So:

- a copied cookie opens the console until it expires, and is no API bearer token;
- each login is a session of its own (its CSRF token too), and logging out forgets it;
- every replica with the same tokens reads every session, and no state is kept;
- changing the configured tokens ends every session (the key changes), and removing a
  token ends its sessions at once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping

from entrypoints.settings import Grant

# How long a login lasts: a working day, then the console asks for the token again.
SESSION_SECONDS = 12 * 3600
_KEY_CONTEXT = b"imbi-scheduler console session v1"
_ID_BYTES = 16


class SessionSigner:
    """Issues and reads the console's session cookies for one set of tokens."""

    def __init__(self, known: Mapping[bytes, Grant]) -> None:
        """`known`: `entrypoints.http.auth.digest_grants` of the configured tokens."""
        self._grants = {digest[:_ID_BYTES].hex(): grant for digest, grant in known.items()}
        self._key = hmac.new(_KEY_CONTEXT, b"".join(sorted(known)), hashlib.sha256).digest()

    def issue(self, token: str, now: float) -> str:
        """The cookie value of a login with `token` (a configured one) at `now`."""
        token_id = hashlib.sha256(token.encode()).digest()[:_ID_BYTES].hex()
        payload = f"{token_id}.{int(now) + SESSION_SECONDS}.{secrets.token_urlsafe(16)}"
        return f"{payload}.{self._sign(payload)}"

    def grant(self, cookie: str, now: float) -> Grant | None:
        """What the session of this cookie may do; None when it is forged, expired, or
        its token is no longer configured."""
        payload, _, signature = cookie.rpartition(".")
        if not payload or not hmac.compare_digest(signature, self._sign(payload)):
            return None
        token_id, expiry, _ = payload.split(".", 2)
        if not expiry.isdigit() or int(expiry) <= now:  # signed by us: digits, unless forged
            return None
        return self._grants.get(token_id)

    def _sign(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()
