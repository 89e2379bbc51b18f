"""What a render of a target's templates costs, in this process and through the worker
processes that render them (docs/adr/0021-template-workers.md).

A target with templates in its url, a header and two body values, rendered N times:
in this process by `Templates` (as before the workers), then through `TemplateWorkers`
one at a time and 100 at once. It prints the wall time and this process's CPU per
render, the wait for the first render (a worker's start) and each worker's memory.
One figure per line, `name value`.

    python bench/templates.py [-n 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.http.template_worker import TemplateStrings
from adapters.http.template_workers import TemplateWorkers
from adapters.http.templates import Templates

TARGET = TemplateStrings(
    "http://example.test/{{ task.name }}?at={{ scheduled_for }}",
    {"X-Run": "{{ run.id }}"},
    {"task": "{{ task.id }}", "tags": "{{ task.tags | join(',') }}", "n": 5},
)
CONTEXT = {
    "task": {"id": "0b5f", "name": "nightly-report", "tags": ["reports", "nightly"]},
    "run": {"id": "7f3a", "scheduled_for": "2026-12-07T06:30:00Z", "manual": False},
    "scheduled_for": "2026-12-07T06:30:00Z",
    "now": "2026-12-07T06:30:01Z",
    "last_run": None,
}


def figure(name: str, value: float) -> None:
    print(f"{name} {value:.4g}", flush=True)


def worker_rss_mb() -> list[float]:
    sizes = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                not entry.name.isdigit()
                or b"template_worker" not in (entry / "cmdline").read_bytes()
            ):
                continue
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[1]) == os.getpid():
                status = (entry / "status").read_text()
                rss = next(line for line in status.splitlines() if line.startswith("VmRSS"))
                sizes.append(int(rss.split()[1]) / 1024)
        except (OSError, StopIteration, IndexError, ValueError):
            continue
    return sizes


async def through_workers(n: int) -> None:
    workers = TemplateWorkers()
    began = time.perf_counter()
    await workers.render(TARGET, CONTEXT)
    figure("first_render_wait_ms", (time.perf_counter() - began) * 1000)
    for at_once in (1, 100):
        turns = asyncio.Semaphore(at_once)

        async def one(turns: asyncio.Semaphore = turns) -> None:
            async with turns:
                await workers.render(TARGET, CONTEXT)

        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        figure(
            f"workers_{at_once}_at_once_wall_us_per_render", (time.perf_counter() - wall) * 1e6 / n
        )
        figure(
            f"workers_{at_once}_at_once_cpu_us_per_render", (time.process_time() - cpu) * 1e6 / n
        )
    for i, rss in enumerate(worker_rss_mb()):
        figure(f"worker_{i + 1}_rss_mb", rss)
    await workers.close()


def in_process(n: int) -> None:
    templates = Templates()
    templates.render(TARGET, CONTEXT)
    cpu = time.process_time()
    for _ in range(n):
        templates.render(TARGET, CONTEXT)
    figure("in_process_cpu_us_per_render", (time.process_time() - cpu) * 1e6 / n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=2000, help="renders per measurement")
    args = parser.parse_args()
    figure("load_average_start", os.getloadavg()[0])
    in_process(args.n)
    asyncio.run(through_workers(args.n))
    figure("load_average_end", os.getloadavg()[0])


if __name__ == "__main__":
    main()
