"""JSON objects that give a member twice are refused, naming where.

RFC 8259 leaves a repeated name to the reader, and Python's and pydantic's parsers keep
the last value: `{"enabled": false, ..., "enabled": true}` (a template or a merge of two
files gone wrong) would then silently drop the first, where this API refuses anything it
would ignore (docs/api.md, "Strict bodies"). The check is one pass of the standard
parser (a few µs for a task's body); only a body that repeats a name is read a second
time, to find the path of the object that does.
"""

from __future__ import annotations

import json
from typing import Any

# What the API says of such a member (a 422 naming it).
REPEATED = "given twice in one object: give each member once"


class RepeatedMember(ValueError):
    """`field` (a dotted path, as the API names fields) is given twice in one object."""

    def __init__(self, field: str) -> None:
        super().__init__(f"{field} is given twice in one object")
        self.field = field


class _Repeat(Exception):
    pass


class _Marked(dict[str, Any]):
    """An object in which `name` came twice (the second read's marker)."""

    name = ""


def _refuse(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs):
        raise _Repeat
    return members


def _mark(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) == len(pairs):
        return members
    marked = _Marked(members)
    seen: set[str] = set()
    for name, _ in pairs:
        if name in seen:
            marked.name = name
            break
        seen.add(name)
    return marked


def loads(text: str | bytes, **options: Any) -> Any:
    """`json.loads(text, **options)`; raises RepeatedMember for an object that gives a
    member twice (and what json.loads raises)."""
    try:
        return json.loads(text, object_pairs_hook=_refuse, **options)
    except _Repeat:
        pass
    where = _marked_at(json.loads(text, object_pairs_hook=_mark, **options), "")
    raise RepeatedMember(where or "body")


def _marked_at(value: Any, path: str) -> str | None:
    if isinstance(value, dict):
        if isinstance(value, _Marked):
            return f"{path}.{value.name}" if path else value.name
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _marked_at(item, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None
