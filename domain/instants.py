"""The resolution of every instant the scheduler stores and answers."""

from __future__ import annotations

from datetime import datetime, timezone


def truncate(instant: datetime) -> datetime:
    """Whole seconds in UTC, truncated: the resolution of every instant the scheduler
    stores (claims, leases, a run's start and end, task timestamps; docs/api.md)."""
    if instant.tzinfo is timezone.utc:  # what the stores and the clock hand out: cheaper
        return instant.replace(microsecond=0) if instant.microsecond else instant
    if instant.tzinfo is None:
        raise ValueError("instant must be timezone-aware")
    return instant.astimezone(timezone.utc).replace(microsecond=0)
