"""The garbage collector of a replica, tuned for its work (docs/adr/0014).

A claim batch, an HTTP fire and an API request each make thousands of short-lived
container objects (validated models, rows, runs). With CPython's default young-generation
threshold (700 allocations) the collector ran about 200 times for 10,000 claimed
occurrences and traversed each batch's survivors again and again: a quarter to a third
of the claimer's CPU. Collecting the young generation every 10,000 allocations instead
keeps the same guarantees (cycles are still found, only later) at a tenth of that cost,
and freezing what start-up built keeps the oldest generation's rare passes short.
"""

from __future__ import annotations

import gc

# Allocations (net of deallocations) of container objects between two collections of
# the young generation; CPython's default is 700.
YOUNG_THRESHOLD = 10_000


def tune_garbage_collector() -> None:
    """Collect once, move every object alive now (modules, the app, the pools) out of the
    collector's sight, and collect the young generation less often. Called once a
    process has started up, by `imbi-scheduler serve` and by the benches that stand for
    it."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
