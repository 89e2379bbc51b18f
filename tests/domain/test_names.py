"""What a task or calendar may be named (docs/api.md, "Writable fields"): nothing a path
cannot reach, a UUID or dots alone; a stored one is read back as it was written."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest
from pydantic import ValidationError

from domain.calendars import Calendar, StoredCalendar
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
