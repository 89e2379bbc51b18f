"""How long an annotated preview of 100 fire times takes, through the use case the API
calls (`SchedulingService.preview_annotated`), for a few triggers: plain cron, a DST
policy, an every-second cron from inside a repeated hour, a weekend calendar rolled, and
a calendar trigger.

    python bench/preview.py [--repeat N]

Prints the best and median milliseconds per preview (goal: under 20 ms).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from domain.calendars import Calendar
from entrypoints.container import build_container

AFTER = datetime(2026, 3, 1, tzinfo=UTC)
WEEKEND = Calendar(name="weekend", weekdays=["SAT", "SUN"])
CASES: dict[str, dict[str, Any]] = {
    "cron */15 9-17 MON-FRI": {"kind": "cron", "expression": "*/15 9-17 * * MON-FRI"},
    "cron daily, NY, gap=skip fold=both": {
        "kind": "cron",
        "expression": "30 1 * * *",
        "timezone": "America/New_York",
        "dst": {"gap": "skip", "fold": "both"},
    },
    "cron 1st of month, weekend rolled back": {
        "kind": "cron",
        "expression": "0 9 1 * *",
        "calendar": {"name": "weekend", "policy": "previous_business_day"},
    },
    "cron daily, weekend rolled forward": {
        "kind": "cron",
        "expression": "0 9 * * *",
        "calendar": {"name": "weekend", "policy": "next_business_day"},
    },
    "cron every second through NY's fall-back": {
        "kind": "cron",
        "expression": "* * * * * *",
        "timezone": "America/New_York",
        "after": datetime(2026, 11, 1, 6, 0, 30, tzinfo=UTC),  # in the repeated hour
    },
    "calendar monthly on the 31st, London": {
        "kind": "calendar",
        "months": 1,
        "hour": 9,
        "start_date": "2026-01-31",
        "timezone": "Europe/London",
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    scheduling = build_container().scheduling()
    print(f"annotated preview of 100 fire times, {args.repeat} runs each")
    for name, case in CASES.items():
        trigger = {key: value for key, value in case.items() if key != "after"}
        after = case.get("after", AFTER)
        timings = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            _, listed = scheduling.preview_annotated(trigger, 100, after, [WEEKEND])
            timings.append((time.perf_counter() - started) * 1000)
        assert len(listed.occurrences) == 100
        print(
            f"{name:<40} best {min(timings):6.2f} ms  median {statistics.median(timings):6.2f} ms"
        )


if __name__ == "__main__":
    main()
