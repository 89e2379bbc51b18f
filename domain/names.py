"""What a task or calendar may be named: paths take an id (a UUID) or a name, the id
first, so a name is never one that reads as an id."""

from __future__ import annotations

from uuid import UUID

NAME_PATTERN = r"^[A-Za-z0-9._-]{1,200}$"
NOT_AN_ID = "must not read as an id (a UUID): paths take either, the id first"


def reads_as_id(ref: str) -> bool:
    """Whether `ref`, in a path, is read as an id rather than a name."""
    try:
        UUID(ref)
    except ValueError:
        return False
    return True
