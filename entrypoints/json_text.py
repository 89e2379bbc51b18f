"""JSON text a person wrote (the console's task editor, a file for `imbi-scheduler
apply`), read with errors that say where and why, as field errors."""

from __future__ import annotations

import json
from typing import Any

from domain.errors import InvalidRequest


def read_json(text: str, field: str, name: str = "") -> Any:
    """The value `text` holds. Raises InvalidRequest on `field`, its message led by
    `name` (a file's path) when given: a syntax error with its line and column, a value
    nested past what Python parses, an integer of more digits than it converts."""
    lead = f"{name} " if name else ""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise InvalidRequest(field, f"{lead}is not JSON: {exc.msg} at {where}") from None
    except RecursionError:
        raise InvalidRequest(field, f"{lead}nests too deep to be read") from None
    except ValueError as exc:
        raise InvalidRequest(field, f"{lead}is not JSON the API reads: {exc}") from None
