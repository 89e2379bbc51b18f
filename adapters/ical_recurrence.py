"""The start dates an all-day event's `RRULE` gives, expanded by python-dateutil's `rrule`
(ADR 0016). Used by adapters/ical.py, which adds `DTSTART`, `RDATE` and takes out `EXDATE`.

dateutil looks for a rule's next date until it finds one or passes the year 9999, whatever
its `UNTIL`: a rule no date satisfies (`FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30`) took seconds
of the event loop. The Gregorian calendar repeats itself every 400 years (146,097 days,
20,871 weeks: the same leap years, weekdays and week numbers), so a rule gives the same
dates shifted by 400 years when its `DTSTART` is; the rule is therefore expanded as late in
the calendar as its span allows, and dateutil gives up within 400 years of its end.
"""

from __future__ import annotations

from datetime import MAXYEAR, date, datetime, timezone
from typing import Any

from dateutil.rrule import rrulestr  # type: ignore[import-untyped]  # no py.typed, no stubs used
from icalendar.prop import vRecur

_CYCLE_YEARS = 400  # the Gregorian calendar's period
# No rule is followed further than this past its DTSTART (a COUNT, or an UNTIL that far).
FOLLOWED_YEARS = 400
_DAY_FREQUENCIES = ("DAILY", "WEEKLY", "MONTHLY", "YEARLY")
# Rule parts RFC 5545 defines only for some frequencies ("N/A" in its table for others).
_ONLY_FOR = {
    "BYYEARDAY": ("YEARLY",),
    "BYWEEKNO": ("YEARLY",),
    "BYMONTHDAY": ("DAILY", "MONTHLY", "YEARLY"),
}
# RFC 5545's rule parts that choose days (BYHOUR, BYMINUTE, BYSECOND choose times).
_DAY_PARTS = frozenset(
    {"FREQ", "UNTIL", "COUNT", "INTERVAL", "BYDAY", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO"}
    | {"BYMONTH", "BYSETPOS", "WKST"}
)


class RuleProblem(ValueError):
    """A rule that cannot be expanded as an all-day event's: the message says why."""


class TooManyDates(Exception):
    """A rule gives more dates than it may (`limit`)."""


def rule_starts(rule: vRecur, start: date, horizon: date, limit: int) -> list[date]:
    """The dates `rule` repeats an event starting on `start` on, in order, from `start`
    through its UNTIL, its COUNT, or (neither given) `horizon`, and never more than
    FOLLOWED_YEARS past `start`. `start` itself is among them only when the rule gives it.
    Raises RuleProblem, and TooManyDates when it gives more than `limit` dates."""
    parts = {str(key).upper(): value for key, value in rule.items()}
    text = _rule_text(parts)
    if not _may_give_dates(parts):
        return []
    until = _until(parts.get("UNTIL"))
    if until is not None and "COUNT" in parts:
        raise RuleProblem("an RRULE has an UNTIL or a COUNT, not both (RFC 5545)")
    end = _followed_until(start)
    if until is not None:
        end = min(end, until)
    elif "COUNT" not in parts:
        end = min(end, horizon)
    if end < start:
        return []
    shift = (MAXYEAR - end.year) // _CYCLE_YEARS * _CYCLE_YEARS
    try:
        expanded = rrulestr(text, dtstart=_midnight(_shifted(start, shift)))
        if until is not None:
            expanded = expanded.replace(until=_midnight(_shifted(end, shift)))
    except (ValueError, TypeError) as exc:
        raise RuleProblem(f"RRULE:{text} cannot be expanded: {exc}") from None
    found: list[date] = []
    for moment in expanded:
        day = _shifted(moment.date(), -shift)
        if day > end:
            break
        found.append(day)
        if len(found) > limit:
            raise TooManyDates(limit)
    counted = parts.get("COUNT")
    if counted and end == date(MAXYEAR, 12, 31) and len(found) < int(counted[0]):
        # Never cut short without a word: the dates it counts go past the last there is.
        raise RuleProblem(f"RRULE:{text} runs past 9999-12-31, the last date there is")
    return found


def _rule_text(parts: dict[str, Any]) -> str:
    unknown = sorted(set(parts) - _DAY_PARTS)
    if unknown:
        raise RuleProblem(
            f"RRULE part {unknown[0]} is not understood for an all-day event, whose rule"
            " chooses days"
        )
    frequency = str((parts.get("FREQ") or [""])[0]).upper()
    if frequency not in _DAY_FREQUENCIES:
        raise RuleProblem(
            "an all-day event repeats DAILY, WEEKLY, MONTHLY or YEARLY, not"
            f" {frequency or 'without a FREQ'}"
        )
    for name, only in _ONLY_FOR.items():
        if name in parts and frequency not in only:
            raise RuleProblem(f"an RRULE's {name} is for {' or '.join(only)} rules (RFC 5545)")
    for name in ("INTERVAL", "COUNT"):
        for value in parts.get(name, []):
            if int(value) < 1:
                raise RuleProblem(f"an RRULE's {name} is 1 or more, not {value}")
    parts = _yearly_when_same(parts)
    without_until = vRecur({key: value for key, value in parts.items() if key != "UNTIL"})
    text: bytes = without_until.to_ical()  # type: ignore[no-untyped-call]  # unannotated
    return text.decode("ascii")


def _may_give_dates(parts: dict[str, Any]) -> bool:
    """False when the rule surely gives no date: answered without dateutil's walk to the
    year 9999 that such a rule costs (see _yearly_when_same)."""
    frequency = str(parts["FREQ"][0]).upper()
    if frequency == "DAILY" and "BYSETPOS" in parts:
        # A day is a set of one date: only the first (1) or the last (-1) of it is there.
        return any(int(position) in (1, -1) for position in parts["BYSETPOS"])
    if frequency in ("DAILY", "WEEKLY") and "BYSETPOS" not in parts:
        # Stepping every period gives a superset of stepping every few: when that, as a
        # yearly rule, never matches a month and day (30 February), neither does this.
        every = _yearly_when_same({**parts, "INTERVAL": [1]})
        if every is not parts and "INTERVAL" in parts:
            months = [int(month) for month in every.get("BYMONTH", range(1, 13))]
            monthdays = [int(day) for day in every.get("BYMONTHDAY", [])]
            return not monthdays or any(_month_has(m, day) for m in months for day in monthdays)
    return True


def _month_has(month: int, day: int) -> bool:
    longest = 29 if month == 2 else 30 if month in (4, 6, 9, 11) else 31
    return 1 <= abs(day) <= longest


def _yearly_when_same(parts: dict[str, Any]) -> dict[str, Any]:
    """`parts` as a YEARLY rule when it gives the same dates, else as they are. A DAILY or
    WEEKLY rule stepping one period at a time whose BYDAY (or, DAILY, BYMONTHDAY) picks
    its days is the YEARLY rule with the same parts; dateutil walks it a year at a time
    rather than a day or a week, which is what bounds a rule that never gives a date
    (`FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30` cost a third of a second as DAILY)."""
    frequency = str(parts["FREQ"][0]).upper()
    if frequency not in ("DAILY", "WEEKLY") or any(int(v) != 1 for v in parts.get("INTERVAL", [])):
        return parts
    allowed = {"FREQ", "UNTIL", "COUNT", "INTERVAL", "BYMONTH", "BYDAY", "WKST"}
    picks = {"BYDAY"}
    if frequency == "DAILY":
        allowed.add("BYMONTHDAY")
        picks.add("BYMONTHDAY")
    if set(parts) - allowed or not picks & set(parts):
        return parts  # without a pick, YEARLY would keep DTSTART's day of the year
    if any(not _plain_weekday(day) for day in parts.get("BYDAY", [])):
        return parts  # "-1MO" means the last Monday of a year, not of a day or a week
    return {**parts, "FREQ": ["YEARLY"]}


def _plain_weekday(day: Any) -> bool:
    return str(day).upper() in ("MO", "TU", "WE", "TH", "FR", "SA", "SU")


def _until(values: list[Any] | None) -> date | None:
    """An UNTIL as the last date it lets in: a date as it is, a date-time as its date
    (in UTC when it names its zone, as RFC 5545 wants it when DTSTART is a date)."""
    if not values:
        return None
    value = values[0]
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
        return value.date()
    if isinstance(value, date):
        return value
    raise RuleProblem(f"an RRULE's UNTIL is a date, not {value!r}")


def _followed_until(start: date) -> date:
    if start.year + FOLLOWED_YEARS >= MAXYEAR:  # as far as dates go: all of year 9999
        return date(MAXYEAR, 12, 31)
    year = start.year + FOLLOWED_YEARS
    try:
        return start.replace(year=year)
    except ValueError:  # 29 February, in a year that has none
        return start.replace(year=year, day=28)


def _shifted(day: date, years: int) -> date:
    """`day` moved by a whole number of 400-year cycles: the same month, day and weekday."""
    return day.replace(year=day.year + years)


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day)
