"""What a task or calendar may be named: paths take an id (a UUID) or a name, the id
first, so a name is never one that reads as an id; nor one of dots alone, which URLs
resolve away. Tags and environment variable names have rules of the same shape; what a
value breaks of any of them is said in words (`mismatch_words`), not as the pattern."""

from __future__ import annotations

import re
from dataclasses import dataclass
from uuid import UUID

NAME_PATTERN = r"^[A-Za-z0-9._-]{1,200}$"
TAG_PATTERN = r"^[A-Za-z0-9._-]{1,100}$"
# Environment variable names as POSIX shells accept them.
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,254}$"

NAME_CHARACTERS = "letters A-Z and a-z, digits, '.', '_' and '-'"


@dataclass(frozen=True, slots=True)
class _Rule:
    allowed: frozenset[str]
    allowed_words: str
    longest: int
    first: frozenset[str] | None = None  # what the first character must be, when narrower
    first_words: str = ""


_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_NAME_SET = _LETTERS | frozenset("0123456789._-")
_RULES = {
    NAME_PATTERN: _Rule(_NAME_SET, NAME_CHARACTERS, 200),
    TAG_PATTERN: _Rule(_NAME_SET, NAME_CHARACTERS, 100),
    ENV_NAME_PATTERN: _Rule(
        _LETTERS | frozenset("0123456789_"),
        "letters A-Z and a-z, digits and '_'",
        255,
        _LETTERS | {"_"},
        "a letter or '_'",
    ),
}


def mismatch_words(pattern: str, value: object) -> str | None:
    """What `value` breaks of the rule `pattern` stands for, in words; None for a
    pattern without such words (its own message then stands)."""
    rule = _RULES.get(pattern)
    if rule is None or not isinstance(value, str):
        return None
    if not value:
        return f"must not be empty: 1 to {rule.longest} characters, {rule.allowed_words}"
    problems = []
    refused = list(dict.fromkeys(ch for ch in value if ch not in rule.allowed))
    if refused:
        shown = ", ".join(repr(ch) for ch in refused[:5]) + (", …" if len(refused) > 5 else "")
        problems.append(f"may hold only {rule.allowed_words}, not {shown}")
    elif rule.first is not None and value[0] not in rule.first:
        problems.append(f"must start with {rule.first_words}, not {value[0]!r}")
    if len(value) > rule.longest:
        problems.append(f"is {len(value)} characters long, more than the {rule.longest} allowed")
    return "; ".join(problems) or None


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


def could_name_a_task(name: str) -> bool:
    """Whether some task could have the name `name` (its pattern, and a path reaches it)."""
    return re.fullmatch(NAME_PATTERN, name) is not None and unreachable_name(name) is None


def reads_as_id(ref: str) -> bool:
    """Whether `ref`, in a path, is read as an id rather than a name."""
    try:
        UUID(ref)
    except ValueError:
        return False
    return True


_POSTGRES_CLIENT_VARIABLE = re.compile(r"PG[A-Z]+")


def reserved_env_name(name: str) -> str | None:
    """Why no task may name the environment variable `name` (the words of a 422, and of a
    run of a task stored before the rule), or None. A task names a variable to send its
    value to a target; the scheduler's own settings and PostgreSQL's client variables
    hold its API tokens, signing secret and database credentials."""
    # Settings are read whatever their letter case (entrypoints/settings.py).
    if name.upper().startswith("SCHEDULER_"):
        return "is one of the scheduler's own settings (SCHEDULER_...), which no task may read"
    if _POSTGRES_CLIENT_VARIABLE.fullmatch(name):
        return (
            "is one of PostgreSQL's client variables (PG...), which may hold the scheduler's "
            "database credentials; no task may read them"
        )
    return None
