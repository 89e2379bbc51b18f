"""The geometry of the console's pictures (the run strip, the fire-time timeline).

Templates draw them as inline SVG; everything here is numbers and plain text, so the
template's autoescaping covers every label.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from domain.occurrences import Occurrence
from domain.runs import Run, RunStatus
from entrypoints.http.console.words import local_time, utc_time

STRIP_RUNS = 30
STRIP_BAR = 8  # px per run, gap included
TIMELINE_WIDTH = 600
TIMELINE_DAYS = 7
LISTED_FIRE_TIMES = 10  # the task page lists this many beneath the timeline

# Height says "good or bad" without colour: successes stand tall, failures hang low.
_BAR_SHAPE = {
    RunStatus.SUCCEEDED: (2, 18),
    RunStatus.RUNNING: (6, 10),
    RunStatus.FAILED: (12, 10),
    RunStatus.MISSED: (14, 6),
    RunStatus.SKIPPED: (14, 6),
    RunStatus.CANCELLED: (14, 6),
    RunStatus.QUEUED: (10, 2),
}


@dataclass(frozen=True, slots=True)
class Bar:
    x: int
    y: int
    height: int
    status: str
    title: str


@dataclass(frozen=True, slots=True)
class Strip:
    width: int
    bars: list[Bar]
    summary: str  # the same facts in words ("28 succeeded, 2 failed")


def run_strip(runs: list[Run], zone_name: str) -> Strip:
    """The last runs, oldest on the left; `runs` come newest first."""
    chosen = list(reversed(runs[:STRIP_RUNS]))
    zone = ZoneInfo(zone_name)
    bars = []
    for index, run in enumerate(chosen):
        y, height = _BAR_SHAPE[run.status]
        local = run.scheduled_for.astimezone(zone)
        # A StrEnum formats as its value (cheaper than .value, 1,500 times a page).
        title = f"{run.status} — {local:%Y-%m-%d %H:%M} {local.tzname()}"
        bars.append(Bar(index * STRIP_BAR, y, height, run.status, title))
    counts = Counter(str(run.status) for run in chosen)
    summary = ", ".join(f"{n} {status}" for status, n in counts.most_common()) or "no runs yet"
    return Strip(max(len(chosen), 1) * STRIP_BAR, bars, summary)


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True, slots=True)
class Mark:
    x: float
    title: str
    flags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Timeline:
    width: int
    days: list[Tick]
    marks: list[Mark]
    caption: str  # what the picture shows, in words (also its accessible name)


def timeline(
    occurrences: list[Occurrence],
    zone_name: str,
    now: datetime,
    days: int = TIMELINE_DAYS,
    *,
    listed: int = LISTED_FIRE_TIMES,
    fetched: int | None = None,
) -> Timeline:
    """The fire times of the next `days` days on one axis, with a tick per local midnight;
    each mark carries the flags the trigger gave its fire time (DST, month end, calendar).

    `occurrences` are the first `fetched` fire times (None: all there are), of which the
    page lists the first `listed`: when all `fetched` come before the window ends the
    picture stops at the last of them, and the caption says so."""
    zone = ZoneInfo(zone_name)
    start = now
    end = now + timedelta(days=days)
    scale = TIMELINE_WIDTH / (end - start).total_seconds()

    def x_of(instant: datetime) -> float:
        return round((instant - start).total_seconds() * scale, 1)

    ticks = []
    day = now.astimezone(zone).date() + timedelta(days=1)
    while (midnight := datetime.combine(day, time(), zone)) < end:
        # A label too close to the right edge would be cut off: the tick stays, unlabelled.
        label = f"{midnight:%a %d}" if x_of(midnight) < TIMELINE_WIDTH - 40 else ""
        ticks.append(Tick(x_of(midnight), label))
        day += timedelta(days=1)
    marks = [
        Mark(
            x_of(occurrence.at),
            f"{local_time(occurrence.at, zone_name)} ({utc_time(occurrence.at)})",
            occurrence.flags,
        )
        for occurrence in occurrences
        if start <= occurrence.at < end
    ]
    return Timeline(
        TIMELINE_WIDTH, ticks, marks, _caption(occurrences, marks, zone, end, days, listed, fetched)
    )


def _caption(
    occurrences: list[Occurrence],
    marks: list[Mark],
    zone: ZoneInfo,
    end: datetime,
    days: int,
    listed: int,
    fetched: int | None,
) -> str:
    if fetched is not None and len(occurrences) >= fetched and occurrences[-1].at < end:
        last = occurrences[-1].at.astimezone(zone)
        return f"The first {len(marks)} fire times, up to {last:%a %H:%M} — more follow"
    words = f"{len(marks)} fire time{'' if len(marks) == 1 else 's'} in the next {days} days"
    # Only those the list below shows: the rest were fetched but are not on the page.
    beyond = sum(1 for occurrence in occurrences[:listed] if occurrence.at >= end)
    return f"{words}, {beyond} more in the list of next fire times" if beyond else words
