"""A deliberately naive reference for cron and calendar triggers (docs/triggers.md,
"Checking the rules").

Nothing here is shared with domain/: cron fields are expanded by a small parser of its
own, wall times are enumerated one by one and matched by set membership, and each is
mapped to instants by the two rules, straight from zoneinfo:

- gap: a wall time is read with fold=0 (the offset before the transition);
- fold: the fold=1 reading is a second fire instant when it is *later* than the fold=0
  one (true only in a repeated hour), and only for schedules matching all 24 hours.

and by the per-trigger DST policies (`gap` skip / transition, `fold` first / second /
both), where a gap time is one whose fold=1 reading is *earlier* than its fold=0 one,
and the transition instant is found by bisecting zoneinfo's offsets second by second.
The cron day rules (L, L-N, D#N, DL) are matched from the month's length here.

It is slow on purpose. It looks at every wall time from 30 hours before the wall time of
`after` to 30 hours past the first wall time that fires, a window wider than any UTC
offset shift of the zones the tests use, so no wall time that could fire first is missed.
"""

from __future__ import annotations

import calendar
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

UTC = timezone.utc
WINDOW = timedelta(hours=30)
GIVE_UP = timedelta(days=366 * 30)

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
WEEKDAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]


def number(text: str, names: list[str], first: int) -> int:
    if text.lower() in names:
        return names.index(text.lower()) + first
    return int(text)


def expand(text: str, low: int, high: int, names: list[str] | None = None) -> set[int]:
    """The values a cron field matches: every value of every list item, one by one.
    Day rules (L, L-N, D#N, DL) are left out; `ReferenceCron` reads them itself."""
    names = names or []
    first_name = 1 if names is MONTHS else 0
    values: set[int] = set()
    for item in text.split(","):
        is_rule = "#" in item or item.upper().endswith("L") or item.upper().startswith("L")
        if names is not MONTHS and is_rule:
            continue
        has_step = "/" in item
        step = 1
        if has_step:
            item, step_text = item.split("/")
            step = int(step_text)
        if item == "*":
            start, stop = low, high
        elif "-" in item:
            a, b = item.split("-")
            start, stop = number(a, names, first_name), number(b, names, first_name)
            if names is WEEKDAYS and b.lower() == "sun" and a.lower() != "sun":
                stop = 7
        else:
            start = number(item, names, first_name)
            stop = max(high, start) if has_step else start
        value = start
        while value <= stop:
            values.add(value)
            value += step
    return values


class ReferenceCron:
    def __init__(self, expression: str) -> None:
        text = MACROS.get(expression.strip().lower(), expression)
        parts = text.split()
        if len(parts) == 5:
            parts = ["0", *parts]
            self.has_seconds = False
        else:
            self.has_seconds = True
        second, minute, hour, day, month, weekday = parts
        self.seconds = expand(second, 0, 59)
        self.minutes = expand(minute, 0, 59)
        self.hours = expand(hour, 0, 23)
        self.days = expand(day, 1, 31)
        self.months = expand(month, 1, 12, MONTHS)
        self.weekdays = {v % 7 for v in expand(weekday, 0, 6, WEEKDAYS)}
        # Day rules: "days before the last" (L is 0), (weekday, n) for D#N, D for DL.
        self.before_last = set()
        for item in day.split(","):
            if item.upper() == "L":
                self.before_last.add(0)
            elif item.upper().startswith("L-"):
                self.before_last.add(int(item[2:]))
        self.nth = set()
        self.last_weekdays = set()
        for item in weekday.split(","):
            if "#" in item:
                name, n = item.split("#")
                self.nth.add((number(name, WEEKDAYS, 0) % 7, int(n)))
            elif item.upper().endswith("L"):
                self.last_weekdays.add(number(item[:-1], WEEKDAYS, 0) % 7)
        self.either_day = day != "*" and weekday != "*"
        self.every_hour = all(h in self.hours for h in range(24))

    def day_matches(self, d: date) -> bool:
        cron_weekday = d.isoweekday() % 7
        length = calendar.monthrange(d.year, d.month)[1]
        by_day = d.day in self.days or any(d.day == length - n for n in self.before_last)
        same_weekdays = [
            x for x in range(1, length + 1) if date(d.year, d.month, x).weekday() == d.weekday()
        ]
        by_weekday = (
            cron_weekday in self.weekdays
            or (cron_weekday, same_weekdays.index(d.day) + 1) in self.nth
            or (cron_weekday in self.last_weekdays and d.day == same_weekdays[-1])
        )
        if self.either_day:
            return d.month in self.months and (by_day or by_weekday)
        return d.month in self.months and by_day and by_weekday

    def walls_of(self, d: date) -> list[datetime]:
        walls = []
        for h in range(24):
            if h not in self.hours:
                continue
            for m in range(60):
                if m not in self.minutes:
                    continue
                for s in range(60):
                    if s in self.seconds:
                        walls.append(datetime(d.year, d.month, d.day, h, m, s))
        return walls


def instants_of(
    wall: datetime, tz: ZoneInfo, both_in_fold: bool, gap: str = "shift", fold: str = "auto"
) -> list[datetime]:
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    if second < first:  # a gap
        if gap == "skip":
            return []
        if gap == "transition":
            return [transition(tz, second, first)]
        return [first]
    if second > first:  # a fold
        if fold == "both" or (fold == "auto" and both_in_fold):
            return [first, second]
        if fold == "second":
            return [second]
    return [first]


def transition(tz: ZoneInfo, low: datetime, high: datetime) -> datetime:
    """The first second in (low, high] whose offset is the offset at high."""
    target = high.astimezone(tz).utcoffset()
    lo, hi = 0, int((high - low).total_seconds())
    while hi - lo > 1:
        middle = (lo + hi) // 2
        if (low + timedelta(seconds=middle)).astimezone(tz).utcoffset() == target:
            hi = middle
        else:
            lo = middle
    return low + timedelta(seconds=hi)


def read(value: datetime | None, tz: ZoneInfo) -> datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=tz, fold=0)
    return value.astimezone(UTC).replace(microsecond=0)


def cron_next(
    expression: str,
    zone: str,
    after: datetime,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    gap: str = "shift",
    fold: str = "auto",
) -> datetime | None:
    cron = ReferenceCron(expression)
    tz = ZoneInfo(zone)
    after = after.astimezone(UTC).replace(microsecond=0)
    start, end = read(start_at, tz), read(end_at, tz)
    lowest = after.astimezone(tz).replace(tzinfo=None) - WINDOW
    found: list[datetime] = []
    stop_at: datetime | None = None
    day = lowest.date()
    while stop_at is None or datetime.combine(day, time()) <= stop_at:
        if datetime.combine(day, time()) > lowest + GIVE_UP:
            return None
        if cron.day_matches(day):
            for wall in cron.walls_of(day):
                if wall < lowest or (stop_at is not None and wall > stop_at):
                    continue
                for moment in instants_of(wall, tz, cron.every_hour, gap, fold):
                    if moment > after and (start is None or moment >= start):
                        found.append(moment)
                        if stop_at is None:
                            stop_at = wall + WINDOW
        day += timedelta(days=1)
    if not found:
        return None
    best = min(found)
    return None if end is not None and best > end else best


def calendar_next(
    *,
    start_date: date,
    years: int = 0,
    months: int = 0,
    weeks: int = 0,
    days: int = 0,
    hour: int = 0,
    minute: int = 0,
    second: int = 0,
    zone: str = "UTC",
    after: datetime,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    gap: str = "shift",
    fold: str = "auto",
) -> datetime | None:
    """Walk k = 0, 1, 2 … and compute each date from start_date afresh."""
    tz = ZoneInfo(zone)
    after = after.astimezone(UTC).replace(microsecond=0)
    start, end = read(start_at, tz), read(end_at, tz)
    k = 0
    while True:
        month_index = start_date.month - 1 + k * (12 * years + months)
        year, month = start_date.year + month_index // 12, month_index % 12 + 1
        last_day = calendar.monthrange(year, month)[1]
        fire_date = date(year, month, min(start_date.day, last_day))
        fire_date += timedelta(days=k * (7 * weeks + days))
        wall = datetime.combine(fire_date, time(hour, minute, second))
        for moment in instants_of(wall, tz, False, gap, fold):
            if moment > after and (start is None or moment >= start):
                return None if end is not None and moment > end else moment
        k += 1


def calendared_cron_next(
    expression: str,
    zone: str,
    after: datetime,
    holidays: set[date],
    weekend: set[int],
    policy: str,
    gap: str = "shift",
    fold: str = "auto",
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> datetime | None:
    """The calendar rules, naively: list the unrolled, unbounded schedule from 60 days
    before `after` to 200 days after (a held date's wall times included, those a gap
    skips too), move or drop each fire on a calendar date
    (`holidays`, or a weekday in `weekend`, Monday = 0) by the policy, checking its two
    unrolled neighbours, then bound, and take the first after `after`. Holidays must lie
    near `after`.
    """
    cron = ReferenceCron(expression)
    tz = ZoneInfo(zone)
    after = after.astimezone(UTC).replace(microsecond=0)
    start, end = read(start_at, tz), read(end_at, tz)

    def closed(day: date) -> bool:
        return day in holidays or day.weekday() in weekend

    unrolled: list[tuple[datetime, datetime]] = []
    day = after.astimezone(tz).date() - timedelta(days=60)
    while day <= after.astimezone(tz).date() + timedelta(days=200):
        if cron.day_matches(day):
            for wall in cron.walls_of(day):
                moments = instants_of(wall, tz, cron.every_hour, gap, fold)
                for moment in moments:
                    unrolled.append((moment, wall))
                if not moments and closed(day):
                    # Skipped by the gap, but on a held date: it rolls all the same (the
                    # DST rules apply on the date it lands on), placed by its shifted
                    # instant among its neighbours.
                    unrolled.append((wall.replace(tzinfo=tz, fold=0).astimezone(UTC), wall))
        day += timedelta(days=1)
    unrolled.sort()
    kept = {moment for moment, _ in unrolled}
    unique = sorted(kept)
    fired: set[datetime] = set()
    for moment, wall in unrolled:
        if not closed(wall.date()):
            fired.add(moment)
            continue
        if policy == "exclude":
            continue
        step = 1 if policy == "next_business_day" else -1
        target = wall.date() + timedelta(days=step)
        while closed(target) and abs((target - wall.date()).days) <= 366:
            target += timedelta(days=step)
        if closed(target):
            continue
        position = unique.index(moment)
        for rolled in instants_of(
            datetime.combine(target, wall.time()), tz, cron.every_hour, gap, fold
        ):
            if step == 1 and position + 1 < len(unique) and rolled > unique[position + 1]:
                continue
            if step == -1 and position > 0 and rolled < unique[position - 1]:
                continue
            fired.add(rolled)
    later = sorted(m for m in fired if m > after and (start is None or m >= start))
    if not later or (end is not None and later[0] > end):
        return None
    return later[0]
