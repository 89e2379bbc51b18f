"""Cron expressions: the grammar, and its expansion into a `CronSchedule`.

The grammar is checked here, field by field, so that errors name the field and so that
what croniter accepts but cron does not (``W``, ``?``, ``H``, a year field, ``L`` and
``#`` outside their fields, descending ranges that croniter wraps around, ``5-5`` that
croniter widens to the whole field) never reaches it. The day rules ``L``, ``L-N``,
``D#N`` and ``DL`` are ours: a schedule using them is stepped day by day, never by
croniter. Stepping through the matching wall times is `_cron_schedule`'s; the mapping
of wall times to instants (the DST rules) is in `_cron_search`.
"""

from __future__ import annotations

import calendar
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import time

from domain._cron_schedule import CronSchedule


class CronError(ValueError):
    """An expression that is not valid cron, or that can never fire."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int  # the highest value one may write (7 = Sunday for day of week)
    last: int  # where `*` and `N/step` stop
    names: Mapping[str, int]


_MONTH_NAMES = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_DAY_NAMES = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

_SECOND = _Field("second", 0, 59, 59, {})
_MINUTE = _Field("minute", 0, 59, 59, {})
_HOUR = _Field("hour", 0, 23, 23, {})
_DAY = _Field("day-of-month", 1, 31, 31, {})
_MONTH = _Field("month", 1, 12, 12, _MONTH_NAMES)
_WEEKDAY = _Field("day-of-week", 0, 7, 6, _DAY_NAMES)
_FIVE = (_MINUTE, _HOUR, _DAY, _MONTH, _WEEKDAY)
_SIX = (_SECOND, *_FIVE)

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_NUMBER = re.compile(r"[0-9]+")
_FIELD_SEPARATOR = re.compile(r"[ \t]+")
# Extensions of Quartz, Jenkins and croniter that cron does not have, with what they mean.
_EXTENSIONS = (
    (re.compile(r"#"), "'#' (nth weekday), which only day of week takes (D#N)"),
    (re.compile(r"\?"), "'?' (no specific value), which cron lacks"),
    (
        re.compile(r"^[0-9]*LW$|^[0-9]+W$|^W[0-9]*$", re.IGNORECASE),
        "'W' (nearest weekday), which cron lacks",
    ),
    (
        re.compile(r"^L(-.*)?$|^[0-9]+L$|^(sun|mon|tue|wed|thu|fri|sat)L$", re.IGNORECASE),
        "'L' (last), which only day of month (L, L-N) and day of week (DL) take",
    ),
    (re.compile(r"^H(\(|/|$)", re.IGNORECASE), "'H' (hashed value), which cron lacks"),
    (re.compile(r"^R(\(|$)", re.IGNORECASE), "'R' (random value), which cron lacks"),
)
_LAST_DAY = re.compile(r"L(?:-([0-9]+))?", re.IGNORECASE)
_NTH_WEEKDAY = re.compile(r"([0-9]+|[A-Za-z]+)#([0-9]*)")
_LAST_WEEKDAY = re.compile(r"([0-9]+|[A-Za-z]+?)L", re.IGNORECASE)
# A year or a range, list or step of years (1970-2999) where six fields put the day of
# week: a Quartz-style year field, which otherwise reads as an out-of-range weekday.
_YEAR = re.compile(r"(19[7-9][0-9]|2[0-9]{3})([-,/][0-9]+)*")
_FIELD_COUNT = (
    "expected 5 fields (minute hour day-of-month month day-of-week), or 6 with a leading"
    " second field"
)


# Large enough for a fleet's distinct expressions: a re-plan or claim pass walking 10,000
# tasks with a few thousand expressions must not evict each one before it comes again.
@functools.lru_cache(maxsize=16_384)
def parse(expression: str) -> CronSchedule:
    """Parse a cron expression. Raises CronError naming the bad field."""
    text = expression.strip()
    if text.startswith("@"):
        if text.lower() not in MACROS:
            raise CronError(f"unknown macro {text!r}; use one of {', '.join(MACROS)}")
        text = MACROS[text.lower()]
    tokens = [token for token in _FIELD_SEPARATOR.split(text) if token]
    if len(tokens) not in (5, 6):
        raise CronError(f"{_FIELD_COUNT}; got {len(tokens)}")
    if len(tokens) == 6 and _YEAR.fullmatch(tokens[-1]):
        raise CronError(
            f"{tokens[-1]} reads as a year, which cron has no field for: six fields are"
            " second minute hour day-of-month month day-of-week"
        )
    fields = _SIX if len(tokens) == 6 else _FIVE
    day_text, weekday_text = tokens[-3], tokens[-1]
    plain_fields = fields[:-3] + fields[-2:-1]
    plain_tokens = tokens[:-3] + tokens[-2:-1]
    sets = [_expand(field, token) for field, token in zip(plain_fields, plain_tokens, strict=True)]
    if len(tokens) == 5:
        sets.insert(0, frozenset({0}))
    seconds, minutes, hours, months = sets
    days, before_last = _expand_days(day_text)
    weekdays, nth_weekdays, last_weekdays = _expand_weekdays(weekday_text)
    day_rules = bool(before_last or nth_weekdays or last_weekdays)
    day_or = day_text != "*" and weekday_text != "*"
    if not day_or:
        _check_days_exist(days, months, before_last)
    return CronSchedule(
        seconds=tuple(sorted(seconds)),
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=days,
        months=months,
        weekdays=weekdays,
        day_or=day_or,
        all_hours=len(hours) == 24,
        canonical=_canonical(
            seconds, minutes, hours, days, months, weekdays, day_or, has_seconds=len(tokens) == 6
        ),
        earliest=time(min(hours), min(minutes), min(seconds)),
        before_last=before_last,
        nth_weekdays=nth_weekdays,
        last_weekdays=last_weekdays,
        day_rules=day_rules,
    )


def _expand_days(token: str) -> tuple[frozenset[int], frozenset[int]]:
    """Day of month: plain values, and the `L` / `L-N` items as N (L is 0)."""
    values: set[int] = set()
    before_last: set[int] = set()
    for item in token.split(","):
        rule = _LAST_DAY.fullmatch(item)
        if rule is None:
            values.update(_expand_item(_DAY, item))
            continue
        if rule.group(1) is not None:
            count = int(rule.group(1))
            if not 1 <= count <= 30:
                raise CronError(f"{_DAY.name} field: in {item!r}, N must be 1-30")
            before_last.add(count)
        else:
            before_last.add(0)
    if not values and not before_last:
        raise CronError(f"{_DAY.name} field: empty")
    return frozenset(values), frozenset(before_last)


def _expand_weekdays(
    token: str,
) -> tuple[frozenset[int], frozenset[tuple[int, int]], frozenset[int]]:
    """Day of week: plain values, `D#N` items as (D, N), `DL` items as D (0 = Sunday)."""
    plain: list[str] = []
    nth: set[tuple[int, int]] = set()
    last: set[int] = set()
    for item in token.split(","):
        if (rule := _NTH_WEEKDAY.fullmatch(item)) is not None:
            which = rule.group(2)
            if not which or not 1 <= int(which) <= 5:
                raise CronError(
                    f"{_WEEKDAY.name} field: in {item!r}, N must be 1-5 (a month has at most"
                    " five of each weekday)"
                )
            nth.add((_value(_WEEKDAY, rule.group(1)) % 7, int(which)))
        elif (rule := _LAST_WEEKDAY.fullmatch(item)) is not None:
            last.add(_value(_WEEKDAY, rule.group(1)) % 7)
        else:
            plain.append(item)
    values = _expand(_WEEKDAY, ",".join(plain)) if plain else frozenset()
    return values, frozenset(nth), frozenset(last)


def _expand(field: _Field, token: str) -> frozenset[int]:
    values: set[int] = set()
    for item in token.split(","):
        values.update(_expand_item(field, item))
    if field is _WEEKDAY:
        values = {0 if value == 7 else value for value in values}
    return frozenset(values)


def _expand_item(field: _Field, item: str) -> range:
    if not item:
        raise CronError(f"{field.name} field: empty item in list")
    for pattern, meaning in _EXTENSIONS:
        if pattern.search(item):
            raise CronError(f"{field.name} field: {item!r} uses {meaning}")
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not _NUMBER.fullmatch(step_text) or int(step_text) == 0:
            raise CronError(f"{field.name} field: step {step_text!r} is not a positive number")
        step = int(step_text)
    if base == "*":
        return range(field.low, field.last + 1, step)
    if "-" in base:
        first_text, _, last_text = base.partition("-")
        if not first_text or not last_text or "-" in last_text:
            raise CronError(f"{field.name} field: {item!r} is not a valid range")
        first = _value(field, first_text)
        last = _value(field, last_text)
        if field is _WEEKDAY and last_text.lower() == "sun" and first_text.lower() != "sun":
            # SUN closing a range is the Sunday that ends the week: FRI-SUN, and 0-SUN
            # is every day as 0-7 is; SUN-SUN stays Sunday alone.
            last = 7
        if first > last:
            raise CronError(
                f"{field.name} field: range {base} runs downward; ranges must run upward"
                f" (write {first_text}-{field.high},{field.low}-{last_text} to wrap)"
            )
        return range(first, last + 1, step)
    first = _value(field, base)
    # N/step runs to the field's end; 7/step in day of week is Sunday alone.
    return range(first, (max(field.last, first) if slash else first) + 1, step)


def _value(field: _Field, text: str) -> int:
    if _NUMBER.fullmatch(text):
        value = int(text)
        if not field.low <= value <= field.high:
            raise CronError(f"{field.name} field: {value} is out of range {field.low}-{field.high}")
        return value
    name = text.lower()
    if name in field.names:
        return field.names[name]
    kind = "a number or a name" if field.names else "a number"
    raise CronError(f"{field.name} field: {text!r} is not {kind}")


def _check_days_exist(
    days: frozenset[int], months: frozenset[int], before_last: frozenset[int] = frozenset()
) -> None:
    """Reject day-of-month values no chosen month has (February counts 29 days)."""
    longest = {month: calendar.monthrange(2024, month)[1] for month in months}
    if any(day <= longest[month] for day in days for month in months):
        return
    if any(count < longest[month] for count in before_last for month in months):
        return
    if before_last:
        raise CronError(
            f"day-of-month field: L-{max(before_last)} is before the first day of every"
            " month chosen, so the expression can never fire"
        )
    day_list = ", ".join(str(day) for day in sorted(days))
    month_list = ", ".join(calendar.month_name[month] for month in sorted(months))
    which = f"days {day_list} never occur" if len(days) > 1 else f"day {day_list} never occurs"
    raise CronError(
        f"day-of-month field: {which} in {month_list}, so the expression can never fire"
    )


def _canonical(
    seconds: frozenset[int],
    minutes: frozenset[int],
    hours: frozenset[int],
    days: frozenset[int],
    months: frozenset[int],
    weekdays: frozenset[int],
    day_or: bool,
    *,
    has_seconds: bool,
) -> str:
    """The schedule written so that croniter reads exactly our semantics.

    A full set is written `*`. Under the either-day rule a full day field makes every
    day match, so both day fields become `*`; otherwise croniter applies the same rule
    when both day fields are lists (it decides by its own expansion, which is why we
    never hand it the user's text).
    """

    def written(values: frozenset[int], size: int) -> str:
        return "*" if len(values) == size else ",".join(str(v) for v in sorted(values))

    day, weekday = written(days, 31), written(weekdays, 7)
    if day_or and "*" in (day, weekday):
        day = weekday = "*"
    fields = [written(minutes, 60), written(hours, 24), day, written(months, 12), weekday]
    if has_seconds:
        fields.append(written(seconds, 60))
    return " ".join(fields)
