"""JSON text a person wrote (the console's task editor, a file for `imbi-scheduler
apply`), read with errors that say where and why, as field errors."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from domain.errors import InvalidRequest
from entrypoints.json_members import REPEATED, RepeatedMember, loads


class _NotJson(ValueError):
    """What Python's parser reads and JSON has not: NaN, Infinity, a number past the
    largest float (which Python reads as infinity)."""


def _no_constant(word: str) -> Any:
    raise _NotJson(f"{word} is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise _NotJson(f"{text} is past the largest number the API reads")
    return number


def read_json(text: str, field: str, name: str = "") -> Any:
    """The value `text` holds. Raises InvalidRequest on `field`, its message led by
    `name` (a file's path) when given: a syntax error with its line and column, a value
    nested past what Python parses, an integer of more digits than it converts, a member
    an object gives twice, and what JSON has not though Python reads it (NaN, Infinity,
    1e400)."""
    lead = f"{name} " if name else ""
    try:
        return loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RepeatedMember as exc:
        raise InvalidRequest(field, f"{lead}{exc.field}: {REPEATED}") from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise InvalidRequest(field, f"{lead}is not JSON: {exc.msg} at {where}") from None
    except RecursionError:
        raise InvalidRequest(field, f"{lead}nests too deep to be read") from None
    except _NotJson as exc:
        raise InvalidRequest(field, f"{lead}is not JSON the API reads: {exc}") from None
    except ValueError:  # an integer of more digits than Python converts
        digits = sys.get_int_max_str_digits()
        raise InvalidRequest(
            field, f"{lead}holds an integer of more than {digits:,} digits, which no field takes"
        ) from None
