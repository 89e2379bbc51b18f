"""What the console's forms send, read into the use cases' requests: the words of each
error name the form's field, as the API's name the body's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from enum import StrEnum
from typing import Any, TypeVar, get_args
from zoneinfo import ZoneInfo

from domain.backfills import BackfillOverlap, BackfillRequest
from domain.errors import InvalidRequest
from domain.validation import FieldError


def form_text(value: Any) -> str:
    """A form field as text ('' for a missing one, or a file)."""
    return value if isinstance(value, str) else ""


# A form's `zone`: its wall times are read in the task's zone, or in UTC (the explain
# and backfill forms of a task page, alike).
ZONES = ("task", "utc")


S = TypeVar("S", bound=StrEnum)


def status_filter(text: str, statuses: type[S]) -> S | None:
    """A list page's `status` filter: None for none. Raises InvalidRequest naming
    `status`, with the statuses there are, for another (a link may carry any text)."""
    if not text:
        return None
    try:
        return statuses(text)
    except ValueError:
        choices = ", ".join(status.value for status in statuses)
        raise InvalidRequest("status", f"must be one of {choices}") from None


def chosen_zone(value: str, task_zone: str) -> str:
    """The zone a task form's wall times are read in. Raises InvalidRequest naming
    `zone` for a value other than ZONES."""
    if value not in ZONES:
        raise InvalidRequest("zone", "must be task or utc")
    return task_zone if value == "task" else "UTC"


@contextmanager
def named_with(errors: list[FieldError]) -> Iterator[None]:
    """Raise InvalidRequest naming `errors` (a bad zone's) beside whatever the block
    refuses, or alone when it refuses nothing."""
    try:
        yield
    except InvalidRequest as exc:
        raise InvalidRequest.of([*exc.errors, *errors]) from None
    if errors:
        raise InvalidRequest.of(errors)


def zone_or_task_zone(value: str, task_zone: str) -> tuple[str, list[FieldError]]:
    """`chosen_zone`, or the task's zone with the error naming `zone`: a form reads its
    other fields all the same, so that each bad one is named at once."""
    try:
        return chosen_zone(value, task_zone), []
    except InvalidRequest as exc:
        return task_zone, exc.errors


def form_instant(field: str, text: str) -> datetime | None:
    """A time from a form: ISO 8601; without an offset it is UTC (the forms say so)."""
    return wall_instant(field, text, "UTC")


def wall_instant(
    field: str, text: str, zone: str, out_of_range: str = "is outside the years 1 to 9999 in UTC"
) -> datetime | None:
    """A time from a form, read as a wall time in `zone` when it has no offset (None for
    an empty field). Python's rule (fold 0) settles the wall times a DST change makes
    odd: one that repeats is its first, one the clocks skip keeps the offset before the
    skip (02:30 on the morning the clocks go from 02:00 to 03:00 is 03:30); the explain
    page shows the instant it read, in the zone and in UTC. An instant with an offset
    keeps it. `out_of_range`: the words for a wall time whose instant is past year 9999
    or before year 1."""
    if not text.strip():
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidRequest(field, "must be a date and time like 2026-03-08T02:30") from None
    if value.tzinfo is not None:
        return value
    if zone == "UTC":
        return value.replace(tzinfo=timezone.utc)
    try:
        return value.replace(tzinfo=ZoneInfo(zone)).astimezone(timezone.utc)
    except OverflowError:  # the first or last hours of year 1 or 9999, read in UTC
        raise InvalidRequest(field, out_of_range) from None


def backfill_request(
    start: Any,
    end: Any,
    *,
    overlap: Any,
    only_missing: bool,
    dry_run: bool,
    zone: str = "UTC",
) -> BackfillRequest:
    """The backfill form's fields as a BackfillRequest, `start` and `end` read as wall
    times in `zone` unless written with an offset (`overlap` left out: the API's
    default, `buffer_all`). Raises InvalidRequest naming every missing or malformed
    field."""
    instants: dict[str, datetime] = {}
    errors: list[FieldError] = []
    for field, text in (("start", start), ("end", end)):
        try:
            instant = wall_instant(field, text if isinstance(text, str) else "", zone)
        except InvalidRequest as exc:
            errors.extend(exc.errors)
            continue
        if instant is None:
            errors.append(FieldError(field, "is required"))
        else:
            instants[field] = instant
    if overlap is None or overlap == "":
        overlap = "buffer_all"
    if overlap not in get_args(BackfillOverlap):
        choices = ", ".join(get_args(BackfillOverlap))
        errors.append(FieldError("overlap", f"must be one of {choices}"))
    if errors:
        raise InvalidRequest.of(errors)
    return BackfillRequest(
        start=instants["start"],
        end=instants["end"],
        only_missing=only_missing,
        overlap=overlap,
        dry_run=dry_run,
    )
