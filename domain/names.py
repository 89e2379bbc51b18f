"""What a task or calendar may be named: paths take an id (a UUID) or a name, the id
first, so a name is never one that reads as an id; nor one of dots alone, which URLs
resolve away."""

from __future__ import annotations

from uuid import UUID

NAME_PATTERN = r"^[A-Za-z0-9._-]{1,200}$"
NOT_AN_ID = "must not read as an id (a UUID): paths take either, the id first"


NOT_ONLY_DOTS = (
    "must not be made of dots alone: '.' and '..' in a path are resolved away by "
    "browsers and HTTP clients, so no path would reach it"
)


def unreachable_name(name: str) -> str | None:
    """Why no path would reach a thing named `name` (the words of a 422), or None."""
    if reads_as_id(name):
        return NOT_AN_ID
    if not name.strip("."):
        return NOT_ONLY_DOTS
    return None


def reads_as_id(ref: str) -> bool:
    """Whether `ref`, in a path, is read as an id rather than a name."""
    try:
        UUID(ref)
    except ValueError:
        return False
    return True
