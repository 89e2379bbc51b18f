"""JSON merge patch (RFC 7396), with paths that are replaced whole instead of merged."""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from domain.validation import FieldError


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


def unknown_removals(
    patch: Any,
    model: type[BaseModel],
    *,
    replace: Sequence[tuple[str, ...]] = (),
    _path: tuple[str, ...] = (),
) -> list[FieldError]:
    """The members of `patch` set to null that name no field of `model` where they are
    merged: removing them would do nothing, so a typo (`{"descripton": null}`) or a field
    the server keeps (`{"next_run_at": null}`) would be a silent no-op. A key of an open
    object (a header) may be removed whether or not it is there, as RFC 7396 has it."""
    errors: list[FieldError] = []
    if not isinstance(patch, dict) or _path in replace:
        return errors
    for key, value in patch.items():
        path = (*_path, key)
        field = model.model_fields.get(key)
        if field is None:
            if value is None:
                errors.append(FieldError(".".join(path), "unknown field"))
            continue
        inner = _model_of(field.annotation)
        if inner is not None and isinstance(value, dict):
            errors += unknown_removals(value, inner, replace=replace, _path=path)
    return errors


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The one model a field holds (`Notify | None` holds `Notify`), if it holds one."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, typing.Annotated):
        models = [m for arg in typing.get_args(annotation) if (m := _model_of(arg)) is not None]
        return models[0] if len(models) == 1 else None
    return None
