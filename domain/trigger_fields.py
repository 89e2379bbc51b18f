"""The field types every trigger kind shares (domain/triggers.py): a timezone name,
an instant that stays in range however it is read, and the DST policy."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

from domain._wallclock import check_zone_name, in_range


def _zone_name(value: str) -> str:
    try:
        return check_zone_name(value)
    except ValueError as exc:
        raise PydanticCustomError("timezone", str(exc)) from exc


ZoneName = Annotated[str, AfterValidator(_zone_name)]


def _in_range(value: datetime) -> datetime:
    if not in_range(value):
        raise PydanticCustomError(
            "instant_range",
            f"{value.isoformat()} is out of range: it must read as an instant between "
            "years 0001 and 9999 in UTC, with two days to spare",
        )
    # Kept as used (docs/triggers.md, "Truncation"): whole seconds, and an aware instant
    # in UTC, so that it is answered as every other instant is. A naive wall time keeps
    # its reading in the trigger's timezone.
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(microsecond=0)
    return value.astimezone(UTC).replace(microsecond=0)


# A trigger's instants (`run_at`, bounds, anchor): every reading of them stays in range.
TriggerInstant = Annotated[datetime, AfterValidator(_in_range)]


def unset(value: object) -> bool:
    return value is None


class DstPolicy(BaseModel):
    """What a wall time that does not exist (`gap`) or exists twice (`fold`) does."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gap: Literal["shift", "skip", "transition"] = "shift"
    fold: Literal["auto", "first", "second", "both"] = "auto"


DEFAULT_DST = DstPolicy()
