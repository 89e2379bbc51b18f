"""Interval lengths: a whole number of seconds, written as a number or an ISO 8601 duration."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

_NUMBER = r"[0-9]+(?:[.,][0-9]+)?"
_DURATION = re.compile(
    rf"(?P<sign>[-+])?P(?:(?P<Y>{_NUMBER})Y)?(?:(?P<M>{_NUMBER})M)?(?:(?P<W>{_NUMBER})W)?"
    rf"(?:(?P<D>{_NUMBER})D)?(?:T(?:(?P<h>{_NUMBER})H)?(?:(?P<m>{_NUMBER})M)?"
    rf"(?:(?P<s>{_NUMBER})S)?)?",
)
_UNITS = ("Y", "M", "W", "D", "h", "m", "s")
_SECONDS = {"W": 604_800, "D": 86_400, "h": 3_600, "m": 60, "s": 1}
# The longest interval: 100 years of 365.25 days. Longer ones gain nothing, and the
# instant arithmetic of the claim (anchor + k * every) must never overflow.
MAX_SECONDS = 3_155_760_000


def seconds_of(value: object) -> int:
    """Whole seconds of an interval given as int, whole float, timedelta or ISO 8601 text.

    Raises:
        ValueError: the value is not a positive whole number of seconds (at most
            MAX_SECONDS); a duration with years or months is refused because those have
            no fixed length.
    """
    if isinstance(value, bool):
        raise ValueError("must be a number of seconds or an ISO 8601 duration, not a boolean")
    if isinstance(value, int):
        seconds = value
    elif isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"must be a whole number of seconds, got {value}")
        seconds = int(value)
    elif isinstance(value, timedelta):
        if value.microseconds:
            raise ValueError(f"must be a whole number of seconds, got {value}")
        seconds = int(value.total_seconds())
    elif isinstance(value, str):
        seconds = _parse_iso(value)
    else:
        raise ValueError("must be a number of seconds or an ISO 8601 duration like 'PT15M'")
    if seconds <= 0:
        raise ValueError(f"must be a positive number of seconds, got {seconds}")
    if seconds > MAX_SECONDS:
        digits = int(seconds.bit_length() * 0.30103) + 1  # str() of 5,000 digits raises
        shown = str(seconds) if seconds < 10**30 else f"a number of about {digits} digits"
        raise ValueError(f"must be at most {MAX_SECONDS} seconds (100 years), got {shown}")
    return seconds


def _parse_iso(text: str) -> int:
    # Units are matched upper-cased: M before the T is months, M after it is minutes.
    normal = text.strip().upper()
    match = _DURATION.fullmatch(normal)
    if match is None or normal.endswith("T"):
        raise ValueError(f"{text!r} is not an ISO 8601 duration like 'PT15M', 'P1D' or 'PT1H30M'")
    parts = {unit: match.group(unit) for unit in _UNITS if match.group(unit) is not None}
    if not parts:
        raise ValueError(f"{text!r} is not an ISO 8601 duration: it has no components")
    given = [unit for unit in _UNITS if unit in parts]
    if any(("." in parts[u] or "," in parts[u]) for u in given[:-1]):
        raise ValueError(f"{text!r}: only the last component of a duration may have a fraction")
    amounts = {unit: Decimal(number.replace(",", ".")) for unit, number in parts.items()}
    if amounts.get("Y") or amounts.get("M"):
        raise ValueError(
            f"{text!r} has years or months, which are not a fixed number of seconds;"
            " use a calendar trigger for those"
        )
    total = sum(
        (amounts.get(unit, Decimal(0)) * factor for unit, factor in _SECONDS.items()), Decimal(0)
    )
    if total != total.to_integral_value():
        raise ValueError(f"{text!r} is not a whole number of seconds")
    return -int(total) if match.group("sign") == "-" else int(total)
