"""Triggers and instants in words, for people reading the console."""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from domain.triggers import (
    FOLD_FIRST,
    FOLD_SECOND,
    GAP_SHIFTED,
    GAP_TRANSITION,
    CalendarTrigger,
    CronTrigger,
    IntervalTrigger,
    OneShotTrigger,
    Trigger,
)

_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
_DAY_NAMES = {name[:3].lower(): str(i) for i, name in enumerate(_DAYS)}
_MONTHS = {calendar.month_abbr[i].lower(): str(i) for i in range(1, 13)}
_UNITS = ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second"))


def zone_words(name: str) -> str:
    """'America/New_York' -> 'New York time'; UTC stays 'UTC'."""
    if name in ("UTC", "Etc/UTC", "GMT"):
        return "UTC"
    return name.rsplit("/", 1)[-1].replace("_", " ") + " time"


def trigger_words(trigger: Trigger) -> str:
    """What a person would say: 'at 02:30 every day, New York time', 'every 15 minutes'."""
    if isinstance(trigger, IntervalTrigger):
        return f"every {duration_words(trigger.every)}"
    if isinstance(trigger, CronTrigger):
        return f"{cron_words(trigger.expression)}, {zone_words(trigger.timezone)}"
    if isinstance(trigger, CalendarTrigger):
        return f"{_calendar_words(trigger)}, {zone_words(trigger.timezone)}"
    assert isinstance(trigger, OneShotTrigger)
    return _one_shot_words(trigger)


def _one_shot_words(trigger: OneShotTrigger) -> str:
    """The wall time written, and what a DST change does to it that day (its policy:
    moved, skipped, the first or both of a time that comes twice)."""
    tz = ZoneInfo(trigger.timezone)
    where = zone_words(trigger.timezone)
    if trigger.run_at.tzinfo is not None and trigger.run_at.utcoffset() is not None:
        return f"once, at {_wall(trigger.fire_instant().astimezone(tz))}, {where}"
    wall = trigger.run_at.replace(microsecond=0)
    said = f"once, at {_wall(wall)}, {where}"
    readings = trigger.read_on(wall.date(), wall.time())
    if not readings:
        return f"{said}; the clocks skip that time that day, so it never fires"
    flags = {flag for _, marks in readings for flag in marks}
    if GAP_SHIFTED in flags or GAP_TRANSITION in flags:
        moved = readings[0][0].astimezone(tz)
        return f"{said}; the clocks skip that time that day, so it fires at {moved:%H:%M:%S %Z}"
    if len(readings) == 2:
        return f"{said}; that time comes twice that day, and it fires at both"
    if FOLD_FIRST in flags or FOLD_SECOND in flags:
        which = "first" if FOLD_FIRST in flags else "second"
        at = readings[0][0].astimezone(tz)
        return f"{said}; that time comes twice that day, and it fires at the {which} ({at:%Z})"
    return said


def _wall(moment: datetime) -> str:
    """'2030-01-02 03:04', with the seconds when there are any."""
    return f"{moment:%Y-%m-%d %H:%M:%S}" if moment.second else f"{moment:%Y-%m-%d %H:%M}"


def duration_words(seconds: int) -> str:
    """900 -> '15 minutes', 3600 -> 'hour', 90 -> '90 seconds' (the largest exact unit)."""
    for size, unit in _UNITS:
        if seconds % size == 0:
            count = seconds // size
            return unit if count == 1 else f"{count} {unit}s"
    return f"{seconds} seconds"  # pragma: no cover - 1 divides everything


def cron_words(expression: str) -> str:
    """The common shapes of a cron expression in words; any other shape as written.
    A step says "every N" only when N divides its field evenly (`*/45` fires at :00 and
    :45, 15 minutes apart across the hour: its values are named instead)."""
    fields = expression.split()
    second = "0"
    if len(fields) == 6:
        second, *fields = fields
    if len(fields) != 5:
        return f"cron {expression}"
    minute, hour, dom, month, dow = fields
    if month != "*":
        return _yearly_words(second, minute, hour, dom, month, dow) or f"cron {expression}"
    if not second.isdigit():
        every_minute = (minute, hour, dom, dow) == ("*", "*", "*", "*")
        steps = _step(second, 60)
        if every_minute and steps is not None:
            return _spread(steps, 60, "second", "minute")
        return f"cron {expression}"
    if minute.isdigit() and hour.isdigit():
        clock = f"at {int(hour):02d}:{int(minute):02d}"
        if second != "0":
            clock += f":{int(second):02d}"
        return _days_words(clock, dom, dow, expression)
    if dom == "*" and dow == "*" and hour == "*" and second == "0":
        if minute == "*":
            return "every minute"
        if (steps := _step(minute, 60)) is not None:
            return _spread(steps, 60, "minute", "hour")
        if minute.isdigit():
            return f"at minute {int(minute)} of every hour"
    hourly = dom == "*" and dow == "*" and minute.isdigit() and second == "0"
    if hourly and (steps := _step(hour, 24)) is not None:
        if 24 % steps == 0:
            return f"every {duration_words(3600 * steps)}, at minute {int(minute)}"
        clocks = [f"{value:02d}:{int(minute):02d}" for value in range(0, 24, steps)]
        return f"at {_and(clocks)} every day"
    return f"cron {expression}"


def _yearly_words(second: str, minute: str, hour: str, dom: str, month: str, dow: str) -> str:
    """'at 00:00 on January 1 every year' for one day of one month at one time; '' for
    any other shape."""
    number = _MONTHS.get(month.lower(), month)
    one_time = second.isdigit() and minute.isdigit() and hour.isdigit()
    if not (one_time and dom.isdigit() and dow == "*" and number.isdigit()):
        return ""
    if not 1 <= int(number) <= 12:
        return ""
    clock = f"at {int(hour):02d}:{int(minute):02d}" + (
        f":{int(second):02d}" if second != "0" else ""
    )
    return f"{clock} on {calendar.month_name[int(number)]} {int(dom)} every year"


def _step(field: str, span: int) -> int | None:
    """N of a step over the whole field (`*/N`, 0 < N < span), else None."""
    if field.startswith("*/") and field[2:].isdigit() and 0 < int(field[2:]) < span:
        return int(field[2:])
    return None


def _spread(step: int, span: int, unit: str, whole: str) -> str:
    """A `*/step` of minutes or seconds: 'every 15 minutes' when the step divides the
    `span`, else the values themselves, which restart at 0 each `whole`."""
    if span % step == 0:
        return f"every {duration_words(step * (60 if unit == 'minute' else 1))}"
    values = [str(value) for value in range(0, span, step)]
    if len(values) <= 4:
        return f"at {unit}s {_and(values)} past each {whole}"
    shown = ", ".join(values[:3])
    return (
        f"at {unit}s {shown}, … {values[-1]} (every {step} {unit}s from :00, "
        f"restarting each {whole})"
    )


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _days_words(clock: str, dom: str, dow: str, expression: str) -> str:
    if dom == "*" and dow == "*":
        return f"{clock} every day"
    if dom == "*":
        days = _weekdays(dow)
        return f"{clock} on {days}" if days else f"cron {expression}"
    if dow == "*" and dom.isdigit():
        return f"{clock} on day {int(dom)} of every month"
    return f"cron {expression}"


def _weekdays(dow: str) -> str | None:
    """'1-5' -> 'Monday to Friday', '0,6' -> 'Sunday and Saturday'; None if unusual."""
    text = dow.lower()
    for name, number in _DAY_NAMES.items():
        text = text.replace(name, number)
    if "-" in text and "," not in text:
        first, _, last = text.partition("-")
        if first.isdigit() and last.isdigit():
            return f"{_DAYS[int(first) % 7]} to {_DAYS[int(last) % 7]}"
        return None
    parts = text.split(",")
    if not all(part.isdigit() and int(part) <= 7 for part in parts):
        return None
    return _and([_DAYS[int(part) % 7] for part in parts])


def _calendar_words(trigger: CalendarTrigger) -> str:
    units = [
        (trigger.years, "year"),
        (trigger.months, "month"),
        (trigger.weeks, "week"),
        (trigger.days, "day"),
    ]
    parts = [unit if n == 1 else f"{n} {unit}s" for n, unit in units if n]
    clock = f"{trigger.hour:02d}:{trigger.minute:02d}"
    if trigger.second:
        clock += f":{trigger.second:02d}"
    every = " and ".join(parts)
    if trigger.weeks or trigger.days:
        return f"at {clock} every {every}"
    # Months and years step from the first date: its day is the day of every fire, and
    # a month without it fires on its last day (the trigger clamps, flagging it).
    first = trigger.first_date()
    if trigger.months:
        clamp = " (the last day of a shorter month)" if first.day > 28 else ""
        return f"at {clock} on day {first.day} of every {every}{clamp}"
    leap_day = (first.month, first.day) == (2, 29)
    clamp = " (28 February in other years)" if leap_day else ""
    return f"at {clock} on {first.day} {first:%B} every {every}{clamp}"


def local_time(instant: datetime, zone_name: str) -> str:
    """'2026-12-02 02:30 EST' in the zone named."""
    local = instant.astimezone(ZoneInfo(zone_name))
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}"


def utc_time(instant: datetime) -> str:
    return f"{instant.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC"


def relative_words(instant: datetime, now: datetime) -> str:
    """'in 5 minutes', '3 hours ago' (rounded down to the largest unit)."""
    delta = instant - now
    ahead = delta >= timedelta(0)
    seconds = int(abs(delta.total_seconds()))
    for size, unit in _UNITS:
        if seconds >= size:
            count = seconds // size
            amount = f"{count} {unit}" + ("" if count == 1 else "s")
            return f"in {amount}" if ahead else f"{amount} ago"
    return "now"


def lateness_words(seconds: float) -> str:
    """Started minus scheduled, in the whole seconds instants are kept in: 'on time', '3 s late'."""
    whole = int(seconds)
    if whole == 0:
        return "on time"
    return f"{whole} s late" if whole > 0 else f"{-whole} s early"


def took_words(seconds: float) -> str:
    """Finished minus started, in whole seconds: both instants are truncated to the second,
    so a zero is 'under 1 s', never '0.000 s'."""
    whole = int(seconds)
    return "took under 1 s" if whole < 1 else f"took {whole} s"


# What a trigger's calendar policy does, as the task page says it.
CALENDAR_POLICY_WORDS = {
    "exclude": "a fire time on one of its dates does not fire",
    "next_business_day": "a fire time on one of its dates moves to the next day not in it",
    "previous_business_day": "a fire time on one of its dates moves to the previous day not in it",
}
