"""What a task or calendar may be named (docs/api.md, "Writable fields"): nothing a path
cannot reach, a UUID or dots alone; a stored one is read back as it was written."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest
from pydantic import ValidationError

from domain.calendars import Calendar, StoredCalendar
from domain.names import ENV_NAME_PATTERN, NAME_PATTERN, TAG_PATTERN, mismatch_words
from tests.fixtures.tasks import make_task, task_spec


@pytest.mark.parametrize("name", [".", "..", "...", str(uuid4())])
def test_a_name_no_path_reaches_is_refused_as_written(name: str) -> None:
    with pytest.raises(ValidationError, match=r"dots alone|read as an id"):
        task_spec(name=name)
    with pytest.raises(ValidationError, match=r"dots alone|read as an id"):
        Calendar(name=name)


@pytest.mark.parametrize("name", ["..", "a..b", ".hidden", "v1.2"])
def test_a_stored_name_of_dots_alone_still_reads_back(name: str) -> None:
    # Written before the rule: the task and calendar keep working.
    assert make_task(name=name).name == name
    now = datetime(2026, 1, 1, tzinfo=UTC)
    stored = StoredCalendar(name=name, id=uuid4(), created_at=now, updated_at=now)
    assert stored.value().name == name


def test_dots_among_other_characters_are_a_name() -> None:
    assert task_spec(name="a..b").name == "a..b"
    assert Calendar(name=".hidden").name == ".hidden"


_CHARACTERS = "letters A-Z and a-z, digits, '.', '_' and '-'"


@pytest.mark.parametrize(
    ("pattern", "value", "words"),
    [
        (TAG_PATTERN, "", f"must not be empty: 1 to 100 characters, {_CHARACTERS}"),
        (TAG_PATTERN, "a" * 101, "is 101 characters long, more than the 100 allowed"),
        (NAME_PATTERN, "a/b c/d", f"may hold only {_CHARACTERS}, not '/', ' '"),
        (
            NAME_PATTERN,
            "ab@" * 100,
            f"may hold only {_CHARACTERS}, not '@'; "
            "is 300 characters long, more than the 200 allowed",
        ),
        (
            NAME_PATTERN,
            "a!b#c$d%e&f*g",
            f"may hold only {_CHARACTERS}, not '!', '#', '$', '%', '&', …",
        ),
        (ENV_NAME_PATTERN, "1TOKEN", "must start with a letter or '_', not '1'"),
        (
            ENV_NAME_PATTERN,
            "MY-TOKEN",
            "may hold only letters A-Z and a-z, digits and '_', not '-'",
        ),
        (NAME_PATTERN, "fine-name", None),  # nothing broken: nothing to say
        (r"^\d+$", "x", None),  # a rule without words keeps pydantic's message
    ],
)
def test_what_a_value_breaks_of_a_name_rule_is_said_in_words(
    pattern: str, value: str, words: str | None
) -> None:
    assert mismatch_words(pattern, value) == words
