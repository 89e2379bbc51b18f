"""Turn pydantic validation errors into field paths as a client wrote them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from domain.names import mismatch_words

# Union members appear in pydantic's error locations under their tag or a generated
# name; a client never wrote those, so they are dropped from the path.
_TAGS = frozenset(
    {
        "cron",
        "interval",
        "calendar",
        "one_shot",
        "none",
        "bearer",
        "basic",
        "oauth2_client_credentials",
    }
)

# The fields that hold a tagged union (a bare union is validated under one of them).
_UNIONS = frozenset({"trigger", "auth"})


@dataclass(frozen=True, slots=True)
class FieldError:
    field: str
    message: str


def field_errors(exc: ValidationError, prefix: str = "") -> list[FieldError]:
    """One `FieldError` per problem, with a dotted path ("trigger.expression")."""
    return described(exc.errors(include_url=False), prefix)


def described(details: Sequence[ErrorDetails], prefix: str = "") -> list[FieldError]:
    """`field_errors` of pydantic's error details (some of them, when a caller keeps only
    those that matter to it)."""
    errors: list[FieldError] = []
    for error in details:
        parts = [prefix] if prefix else []
        previous = prefix
        for part in error["loc"]:
            text = str(part)
            # A tag only where a union sits (a trigger's `calendar` field is no tag).
            is_tag = text in _TAGS and previous in _UNIONS
            previous = text
            if is_tag or "[" in text or text.startswith("function-"):
                continue
            parts.append(text)
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown field"
        elif error["type"] == "union_tag_not_found":
            # A trigger without `kind`, an auth without `type`: there is no default kind
            # (docs/api.md, "Trigger" and "Auth"), so name the missing member itself.
            parts.append(str(error.get("ctx", {}).get("discriminator", "")).strip("'"))
            message = "Field required: it says which kind this is"
        elif error["type"] == "union_tag_invalid":
            expected = error.get("ctx", {}).get("expected_tags", "")
            parts.append(str(error.get("ctx", {}).get("discriminator", "")).strip("'"))
            message = f"must be one of {expected}"
        elif error["type"] == "timezone_aware":  # as a query's instant is worded
            message = (
                'must be an RFC 3339 date-time with an offset (such as "2026-03-09T06:30:00Z")'
            )
        elif error["type"] == "string_pattern_mismatch":
            pattern = str(error.get("ctx", {}).get("pattern", ""))
            message = mismatch_words(pattern, error["input"]) or message
        elif error["type"] in WRONG_TYPE:
            message = wrong_type(error["type"], error["input"])
        elif error["type"] in _BOUNDS:
            message = bound_words(error) or message
        elif message.startswith("Value error, "):
            message = message.removeprefix("Value error, ")
        errors.append(FieldError(".".join(parts) or "body", message))
    return errors


# What a member must be, by the error pydantic gives for a value of another JSON type.
# Request bodies are validated strictly (docs/api.md, "Conventions"): a string is not a
# number or a boolean, a number is not a boolean or an instant, 2.0 is not an integer.
WRONG_TYPE = {
    "bool_type": "a boolean (true or false)",
    "bool_parsing": "a boolean (true or false)",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "datetime_type": 'an RFC 3339 date-time string (such as "2026-03-09T06:30:00Z")',
    "date_type": 'a date string written YYYY-MM-DD (such as "2026-03-09")',
    "list_type": "an array",
    "tuple_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
}


# pydantic's bound errors, said as the rest of the API says them ("is 300 characters
# long, more than the 200 allowed"), not in pydantic's words ("String should have …").
_BOUNDS = frozenset(
    {
        "string_too_long",
        "string_too_short",
        "too_long",
        "too_short",
        "less_than_equal",
        "greater_than_equal",
        "less_than",
        "greater_than",
    }
)


def bound_words(error: ErrorDetails) -> str | None:
    """The words of a bound error (one of _BOUNDS), or None for a shape not known."""
    ctx = error.get("ctx", {})
    value = error.get("input")
    kind = error["type"]
    if kind == "string_too_long" and isinstance(value, str):
        longest = ctx.get("max_length")
        return f"is {len(value)} characters long, more than the {longest} allowed"
    if kind == "string_too_short":
        shortest = ctx.get("min_length")
        if shortest == 1:
            return "must not be empty"
        return f"must be at least {shortest} characters long"
    if kind == "too_long" and isinstance(value, list | tuple | dict):
        return f"has {len(value)} items, more than the {ctx.get('max_length')} allowed"
    if kind == "too_short":
        return f"must have at least {ctx.get('min_length')} items"
    words = {
        "less_than_equal": ("le", "at most"),
        "greater_than_equal": ("ge", "at least"),
        "less_than": ("lt", "less than"),
        "greater_than": ("gt", "greater than"),
    }.get(kind)
    if words is None or words[0] not in ctx:
        return None
    return f"must be {words[1]} {_number(ctx[words[0]])}, not {_number(value)}"


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def json_type(value: object) -> str:
    """How a decoded JSON value's type reads in a sentence: "a string", "null", …"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return f"a number with a decimal point ({value!r})"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def wrong_type(error_type: str, value: object) -> str:
    """The message of a member whose JSON type is not the one it must have:
    "must be a boolean (true or false), not a string"."""
    wanted = WRONG_TYPE[error_type]
    if wanted == "an integer" and isinstance(value, float) and value.is_integer():
        return f"must be an integer, written without a decimal point ({int(value)}, not {value!r})"
    return f"must be {wanted}, not {json_type(value)}"


NUL_MESSAGE = "must not contain the NUL character (U+0000)"


def nul_at(value: object, path: str = "") -> str | None:
    """The dotted path of the first text in `value` (a decoded JSON value: its strings,
    object keys, array items) that holds U+0000, or None. No stored text may hold it
    (docs/api.md, "Text"): PostgreSQL's text and jsonb cannot, so both stores refuse it
    alike."""
    if not path:
        # One pass in C first (JSON escapes U+0000 as \u0000); the walk names the field.
        try:
            if "\\u0000" not in json.dumps(value, ensure_ascii=False, default=str):
                return None
        except (TypeError, ValueError):
            pass  # keys json cannot write, or a cycle: walk
    if isinstance(value, str):
        return (path or "body") if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if "\x00" in str(key):
                return where
            found = nul_at(item, where)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = nul_at(item, f"{path}.{index}" if path else str(index))
            if found is not None:
                return found
    return None
