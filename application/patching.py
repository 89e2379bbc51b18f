"""JSON merge patch (RFC 7396), with paths that are replaced whole instead of merged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def merge_patch(
    target: Any, patch: Any, *, replace: Sequence[tuple[str, ...]] = (), _path: tuple[str, ...] = ()
) -> Any:
    """Apply `patch` to `target` (neither is modified) and return the result.

    An object member set to null is removed; any other member is merged recursively,
    except at the paths in `replace`, where the patch's value replaces the old one.
    """
    if not isinstance(patch, dict) or _path in replace:
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value, replace=replace, _path=(*_path, key))
    return result
