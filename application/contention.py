"""Writes without `If-Match` under concurrent writers (docs/api.md, "PATCH /tasks/{id}").

Such a write reads the row, changes it and writes it only if its version has not moved
meanwhile; when it has, another writer won, and the write starts over from the new
version, so no change is lost. Twenty concurrent writers to one task on PostgreSQL
once ran out of five immediate attempts (the losers of each round collided again in
step) and answered 412, which a client that sent no `If-Match` cannot act on. Now each
loser waits a short random time, bounded by a limit that doubles with each collision,
before it reads again: the writers spread out and each one lands.
"""

from __future__ import annotations

import asyncio
import random

from domain.errors import WriteContended

# Far more than concurrent writers to one row ever need (each round lets one through);
# with the pauses below, about 4 s in the worst case before WriteContended.
WRITE_ATTEMPTS = 50
_FIRST_PAUSE_LIMIT = 0.002  # seconds
_PAUSE_LIMIT = 0.1


async def before_retry(attempt: int, what: str) -> None:
    """Pause before attempt `attempt + 1` (counted from 0), or raise WriteContended
    naming `what` when that was the last one allowed."""
    if attempt + 1 >= WRITE_ATTEMPTS:
        raise WriteContended(what, WRITE_ATTEMPTS)
    # Not a clock of the application's: a real pause between two real writes.
    limit = min(_PAUSE_LIMIT, _FIRST_PAUSE_LIMIT * 2**attempt)
    await asyncio.sleep(random.uniform(0, limit))  # spreading writers, not a secret
