"""The soak's plan of faults (bench/soak.py): a fixed one for short runs, the test
suite's; one drawn from the seed for longer runs, printed first so a run can be
repeated."""

from __future__ import annotations

import random

PAUSE = 40.0  # longer than every lease of the soak's tasks (at most 35 s)
# (seconds after the start, fault), every 3 s. Nothing comes late: the sweep waits for
# the leases (35 s at most) of what each fault may have orphaned, a kill's or a pause's
# runs, or those of a claim whose commit answer a connection fault lost.
SHORT_PLAN = [
    (1, "pause"), (3, "kill"), (6, "cut"), (9, "terminate"), (12, "cut"),
    (15, "blackhole"), (21, "kill"), (24, "cut"), (27, "terminate"), (30, "cut"),
    (33, "terminate"), (36, "blackhole"),
]  # fmt: skip
LONG_KINDS = ["cut", "cut", "terminate", "terminate", "blackhole", "kill", "kill", "pause"]


def plan(duration: float, seed: int, *, restart: bool = False) -> list[tuple[float, str]]:
    """(seconds after the start, fault kind), in order: up to 90 s the short plan's
    faults before `duration`; longer, a fault every 3-12 s drawn from `seed`, stopping
    early enough for a last pause to end within `duration`. `restart` adds one
    PostgreSQL restart at 70 % of the run."""
    if duration <= 90:
        faults = [(float(at), kind) for at, kind in SHORT_PLAN if at < duration]
    else:
        rng = random.Random(seed)
        faults, at = [], 1.0
        while at < duration - PAUSE - 10:
            faults.append((round(at, 1), rng.choice(LONG_KINDS)))
            at += rng.uniform(3, 12)
    if restart:
        faults.append((duration * 0.7, "restart_postgres"))
        faults.sort()
    return faults
