"""Wall-clock times, instants and the DST rules that join them (see docs/triggers.md).

Everything here is pure: time zones come from `zoneinfo`, and no function reads a clock.
Instants travel as aware UTC datetimes with whole seconds; wall times as naive datetimes.
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

UTC = timezone.utc
ONE_SECOND = timedelta(seconds=1)

_FIRST = datetime.min.replace(tzinfo=UTC) + timedelta(days=2)
_LAST = datetime.max.replace(tzinfo=UTC) - timedelta(days=2)

# Names zoneinfo resolves but that are not IANA zones: they mean whatever the host's
# configuration says, so a trigger using them would fire differently on each replica.
_HOST_ALIASES = frozenset({"localtime", "posixrules"})


@functools.lru_cache(maxsize=512)
def zone(name: str) -> ZoneInfo:
    """The `ZoneInfo` for an IANA name that `check_zone_name` accepted."""
    return ZoneInfo(name)


def check_zone_name(name: str) -> str:
    """Return `name` when it is a time zone zoneinfo knows, else raise ValueError."""
    if name in _HOST_ALIASES:
        raise ValueError(f"{name!r} names the host's own zone, not an IANA time zone")
    if name.startswith("right/"):
        # tzdata's variants that count leap seconds: read as a civil zone, each of their
        # transitions lands 20-odd seconds from the one the world keeps.
        raise ValueError(
            f"{name!r} counts leap seconds, which no clock here does; use {name[6:]!r}"
        )
    try:
        zone(name)
    except (ValueError, KeyError, OSError, UnicodeError) as exc:
        raise ValueError(
            f"unknown time zone {name!r}; use an IANA name like 'Europe/London'"
        ) from exc
    return name


def require_aware(value: datetime, what: str = "after") -> None:
    """Raise ValueError for a naive datetime, which has no instant of its own."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be an aware datetime, got naive {value.isoformat()}")


def in_range(value: datetime) -> bool:
    """Whether `value` reads as an instant two days inside datetime's range: a naive
    one in any timezone (no offset is a day), an aware one by its own offset."""
    if value.tzinfo is None or value.utcoffset() is None:
        return _FIRST <= value.replace(tzinfo=UTC) <= _LAST
    try:
        return _FIRST <= value.astimezone(UTC) <= _LAST
    except OverflowError:
        return False


def instant(value: datetime, tz: ZoneInfo) -> datetime:
    """The UTC instant `value` names, truncated to the second.

    An aware value keeps its own offset; a naive one is a wall time in `tz`, read by the
    gap and fold rules (PEP 495 `fold=0`: the offset in force before the transition).
    """
    if value.tzinfo is None or value.utcoffset() is None:
        value = value.replace(tzinfo=tz, fold=0)
    return value.astimezone(UTC).replace(microsecond=0)


def local_reading(moment: datetime, tz: ZoneInfo) -> datetime | None:
    """The aware `moment` read in `tz`; None when that is before the year 1 (the first
    hours of year 1 in UTC, in a zone behind it): every wall time there is then later
    than `moment`."""
    try:
        return moment.astimezone(tz)
    except OverflowError:
        if moment.year == 1:
            return None
        raise


def wall_instant(wall: datetime, tz: ZoneInfo) -> datetime:
    """The one instant a naive wall time fires at under the fold=0 rule."""
    return wall.replace(tzinfo=tz, fold=0).astimezone(UTC)


def repeated_instant(wall: datetime, tz: ZoneInfo) -> datetime | None:
    """The second instant of a wall time that happens twice, else None.

    In a fold, `fold=1` reads the wall time with the offset after the transition, which
    gives a later instant. In a gap it gives an earlier one, which is not a fire time.
    """
    first = wall.replace(tzinfo=tz, fold=0).utcoffset()
    second = wall.replace(tzinfo=tz, fold=1).utcoffset()
    if first is None or second is None or second >= first:
        return None
    return (wall - second).replace(tzinfo=UTC)


def offset_at(tz: ZoneInfo, moment: datetime, shift: timedelta = timedelta(0)) -> timedelta:
    """The UTC offset `tz` is at on the aware instant `moment + shift`.

    The instant is clamped to two days inside datetime's range, so that looking around
    an instant near year 1 or 9999 does not overflow.
    """
    try:
        moment = min(max(moment + shift, _FIRST), _LAST)
    except OverflowError:
        moment = _FIRST if shift < timedelta(0) else _LAST
    offset = moment.astimezone(tz).utcoffset()
    assert offset is not None  # a ZoneInfo always has one
    return offset


def transition_between(tz: ZoneInfo, low: datetime, high: datetime) -> datetime:
    """The first instant in (low, high] at `high`'s offset, to the second.

    Callers know the offsets at `low` and `high` differ and that only one transition lies
    between them, so a bisection finds it in about 17 steps for a day-long window.
    """
    before = offset_at(tz, low)
    lo, hi = 0, int((high - low).total_seconds())
    while hi - lo > 1:
        middle = (lo + hi) // 2
        if offset_at(tz, low + timedelta(seconds=middle)) == before:
            lo = middle
        else:
            hi = middle
    return low + timedelta(seconds=hi)


# What a wall time that does not exist (gap) or exists twice (fold) does, per trigger.
GAP_POLICIES = ("shift", "skip", "transition")
FOLD_POLICIES = ("auto", "first", "second", "both")

# Flags an occurrence carries: how its wall time became its instant.
GAP_SHIFTED = "gap_shifted"
GAP_TRANSITION = "gap_transition"
FOLD_FIRST = "fold_first"
FOLD_SECOND = "fold_second"

Reading = tuple[datetime, tuple[str, ...]]
_PLAIN: tuple[str, ...] = ()


def read_wall(
    wall: datetime, tz: ZoneInfo, gap: str = "shift", fold: str = "auto", all_hours: bool = False
) -> tuple[Reading, ...]:
    """The instants a naive wall time fires at, ascending, each with its flags.

    This one function is the DST rule of every wall-clock trigger, for fire times and
    their annotations alike. With the defaults (`shift`, `auto`) it is the contract's
    rule: a gap time moves forward by the gap; a repeated time fires at its first
    instant, or at both when `all_hours` (hourly and finer cron). `skip` gives no
    instant for a gap time; `transition` gives the instant the clocks change.
    """
    if wall.fold:
        wall = wall.replace(fold=0)
    # ZoneInfo reads a naive datetime's fields and fold: cheaper than attaching it.
    off0 = tz.utcoffset(wall)
    off1 = tz.utcoffset(wall.replace(fold=1))
    assert off0 is not None and off1 is not None  # a ZoneInfo always has one
    first = (wall - off0).replace(tzinfo=UTC)
    if off0 == off1:
        return ((first, _PLAIN),)
    if off1 > off0:  # a gap: fold=1 reads with the later, larger offset
        if gap == "shift":
            return ((first, (GAP_SHIFTED,)),)
        if gap == "skip":
            return ()
        low = (wall - off1).replace(tzinfo=UTC)
        return ((transition_between(tz, low, first), (GAP_TRANSITION,)),)
    second = (wall - off1).replace(tzinfo=UTC)
    if fold == "both" or (fold == "auto" and all_hours):
        return ((first, (FOLD_FIRST,)), (second, (FOLD_SECOND,)))
    if fold == "second":
        return ((second, (FOLD_SECOND,)),)
    return ((first, (FOLD_FIRST,)),)
