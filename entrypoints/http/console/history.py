"""A task's history as the task page lists it: each changed field old → new, an object
(the target, the trigger) by the members that changed, each value cut short alone."""

from __future__ import annotations

import json
from typing import Any

from domain.credential_headers import CREDENTIAL_HEADERS, REDACTED

CHANGE_TEXT = 120  # characters of an old or new value shown; the API has the whole
# A credential header a task stored before such headers were refused (the API and the
# dry run hide it too).
_SECRET_PATHS = frozenset(f"target.headers.{name}" for name in CREDENTIAL_HEADERS)
_ABSENT = object()


def change_lines(
    changes: dict[str, tuple[Any, Any]], *, created: bool = False
) -> list[tuple[str, str | None, str]]:
    """(field, old, new) for each change, by dotted path: `target.url`, not `target`. A
    task's creation (version 1, every old value null) is (field, None, value) for each
    field set: a value, not a change from null."""
    if created:
        return [
            (f, None, _text(f, new)) for f, (_, new) in sorted(changes.items()) if new is not None
        ]
    lines: list[tuple[str, str | None, str]] = []
    for field, (old, new) in sorted(changes.items()):
        if old != new:
            lines.extend(_lines(field, old, new))
    return lines


def _lines(path: str, old: Any, new: Any) -> list[tuple[str, str | None, str]]:
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[tuple[str, str | None, str]] = []
        for key in sorted(old.keys() | new.keys()):
            before, after = old.get(key, _ABSENT), new.get(key, _ABSENT)
            if before != after:
                found.extend(_lines(f"{path}.{key}", before, after))
        return found
    return [(path, _text(path, old), _text(path, new))]


def _text(path: str, value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    written = json.dumps(_redacted(path, value), ensure_ascii=False, sort_keys=True)
    return written if len(written) <= CHANGE_TEXT else written[: CHANGE_TEXT - 1] + "…"


def without_literal_credentials(fields: dict[str, Any]) -> dict[str, Any]:
    """A task's fields as the console shows them: a literal credential header as `***`."""
    return {key: _redacted(key, value) for key, value in fields.items()}


def _redacted(path: str, value: Any) -> Any:
    if path.lower() in _SECRET_PATHS and value is not None:
        return REDACTED
    if isinstance(value, dict):
        return {key: _redacted(f"{path}.{key}", item) for key, item in value.items()}
    return value
