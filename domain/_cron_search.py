"""The search for a cron schedule's next fire instant, under a trigger's DST policy.

Wall times are stepped in ascending order (`CronSchedule.walls_from`); their instants
are not, around a transition. So the search also looks at wall times just below the
wall time of `after` when a transition is near, and keeps stepping after a candidate
until no later wall time can map to an earlier instant. Every wall time becomes
instants through `read_wall`, the one DST rule of the project, so the flags an
annotated listing shows come from the very computation that chose the fire time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from domain._cron_schedule import CronSchedule
from domain._wallclock import (
    FOLD_SECOND,
    GAP_SHIFTED,
    ONE_SECOND,
    UTC,
    local_reading,
    offset_at,
    read_wall,
    transition_between,
    wall_instant,
)

# A fire found: its instant, the wall time it was named by, and its flags.
Found = tuple[datetime, datetime, tuple[str, ...]]
# Told of each wall time that does not fire because of the gap policy `skip`: the
# instant it would have had under `shift` (to place it in time) and the wall time.
GapSkipped = Callable[[datetime, datetime], None]

# A neighbourhood wider than any UTC-offset shift in tzdata (24 h, Alaska 1867 and Samoa
# 2011). tzdata never puts two transitions of one zone within 95 h of each other, so a
# window of 2 * _NEAR holds at most one transition and its two ends show both offsets.
_NEAR = timedelta(hours=27)


def next_fire(
    schedule: CronSchedule,
    tz: ZoneInfo,
    after: datetime,
    gap: str = "shift",
    fold: str = "auto",
    skipped: GapSkipped | None = None,
) -> Found | None:
    """The first fire strictly after the aware UTC whole-second `after`, or None."""
    local = local_reading(after, tz)
    if local is None:  # before year 1 here: the first wall time fires
        return _first_from_year_one(schedule, tz, after, gap, fold, skipped)
    wall_after = local.replace(tzinfo=None)
    offset_after = local.utcoffset()
    assert offset_after is not None
    best = _early_candidate(schedule, tz, after, wall_after, offset_after, gap, fold, skipped)
    windows = _beating_walls(tz, after, best[0]) if best is not None else None
    lowest = wall_after + ONE_SECOND  # the lowest wall time not yet looked at
    walls = schedule.walls_from(lowest)
    while True:
        if windows is not None:
            ahead = _first_in(windows, lowest)
            if ahead is None:
                return best  # no wall time from here on maps between `after` and `best`
            if ahead > lowest:  # skip the wall times that cannot (a repeated hour's)
                lowest = ahead
                walls = schedule.walls_from(lowest)
        wall = next(walls, None)
        if wall is None:
            return best
        readings = read_wall(wall, tz, gap, fold, schedule.all_hours)
        if not readings and skipped is not None:
            skipped(wall_instant(wall, tz), wall)
        for moment, flags in readings:
            if moment > after and (best is None or moment < best[0]):
                best = (moment, wall, flags)
                windows = _beating_walls(tz, after, moment)
        lowest = wall + ONE_SECOND


def _first_from_year_one(
    schedule: CronSchedule,
    tz: ZoneInfo,
    after: datetime,
    gap: str,
    fold: str,
    skipped: GapSkipped | None,
) -> Found | None:
    """The first fire of the schedule's wall times from 0001-01-01 00:00:00, all of
    which are later than `after` (it lies before year 1 in `tz`)."""
    for wall in schedule.walls_from(datetime.min):
        readings = read_wall(wall, tz, gap, fold, schedule.all_hours)
        if not readings and skipped is not None:
            skipped(wall_instant(wall, tz), wall)
        for moment, flags in readings:
            if moment > after:
                return moment, wall, flags
    return None


def _early_candidate(
    schedule: CronSchedule,
    tz: ZoneInfo,
    after: datetime,
    wall_after: datetime,
    offset_after: timedelta,
    gap: str,
    fold: str,
    skipped: GapSkipped | None,
) -> Found | None:
    """The best fire > `after` among wall times <= the wall time of `after`.

    Only two kinds of earlier wall time can fire later: the skipped wall times of a gap
    that `after` lies within (read with the earlier offset, they land up to a gap's length
    past the transition), and wall times of a repeated hour that is about to start whose
    second passage fires (hourly-or-finer schedules, or the `second` and `both` policies).
    A `transition` gap time lands on the transition, never after `after` here.
    """
    offset_before = offset_at(tz, after, -_NEAR)
    offset_ahead = offset_at(tz, after, _NEAR)
    naive_after = after.replace(tzinfo=None)
    if offset_before < offset_after:  # the clock jumped forward less than _NEAR ago
        lowest = naive_after + offset_before + ONE_SECOND
        if gap == "shift":
            wall = schedule.first_wall(lowest)
            if wall is not None and wall <= wall_after:
                moment = wall_instant(wall, tz)
                if moment > after:
                    return moment, wall, (GAP_SHIFTED,)
        elif gap == "skip" and skipped is not None:  # only to tell of them
            for wall in schedule.walls_from(lowest):
                if wall > wall_after:
                    break
                moment = wall_instant(wall, tz)
                if moment > after and not read_wall(wall, tz, gap, fold):
                    skipped(moment, wall)
    second_passes = fold in ("second", "both") or (fold == "auto" and schedule.all_hours)
    if second_passes and offset_ahead < offset_after:  # a repeated hour is coming
        change = transition_between(tz, after, after + _NEAR)
        first_repeat = change.replace(tzinfo=None) + offset_ahead
        if first_repeat <= wall_after:
            wall = schedule.first_wall(first_repeat)
            if wall is not None and wall <= wall_after:
                return _utc(wall - offset_ahead), wall, (FOLD_SECOND,)
    return None


def _beating_walls(
    tz: ZoneInfo, after: datetime, best: datetime
) -> list[tuple[datetime, datetime]]:
    """The ranges of wall times (first, last, whole seconds) that could still fire
    strictly between `after` and `best`.

    A later wall time beats `best` only by being read with a larger offset, in force at
    most a shift (< _NEAR) before `best`, or just before a gap that ended there: every
    wall time below `best` read with the largest of those offsets may. When `best` is
    near and no gap is, the zone has at most two offsets there, and a wall time `w` read
    with offset `o` is the instant `w - o`: only the wall times naming an instant
    between `after` and `best` under one of them may (a gap's wall times are left to
    the first rule: `transition` reads them as the transition itself). Without the
    second rule, an every-second schedule stepped through the whole first passage of a
    repeated hour, 3,600 wall times, for each fire in its second passage."""
    before, at = offset_at(tz, best, -2 * _NEAR), offset_at(tz, best)
    high = best.replace(tzinfo=None)
    if before < at or best - after > _NEAR:  # a gap near `best`, or `after` far from it
        return [(datetime.min, high + max(before, at) - ONE_SECOND)]
    low = after.replace(tzinfo=None)
    return [(low + offset + ONE_SECOND, high + offset - ONE_SECOND) for offset in {before, at}]


def _first_in(windows: list[tuple[datetime, datetime]], lowest: datetime) -> datetime | None:
    """The first wall time >= `lowest` inside one of `windows`, or None."""
    starts = [max(first, lowest) for first, last in windows if max(first, lowest) <= last]
    return min(starts, default=None)


def _utc(naive: datetime) -> datetime:
    return naive.replace(tzinfo=UTC)
