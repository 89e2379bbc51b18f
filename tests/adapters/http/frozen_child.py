"""A process for tests/adapters/http/test_frozen_process.py to stop and continue: it calls
the URL given (one attempt, `timeout_seconds` as given, its first call or, with `warm`,
after one call that kept the connection) and prints the outcome as JSON."""

from __future__ import annotations

import asyncio
import json
import sys

from adapters.http import HttpExecutor
from tests.adapters.http.builders import http_task, make_run


async def main(url: str, seconds: float, warm: bool) -> None:
    executor = HttpExecutor(environ={})
    task = http_task(url, timeout_seconds=seconds)
    try:
        if warm:
            await executor.execute(task, make_run(task), None)
        print("calling", flush=True)
        outcome = await executor.execute(task, make_run(task), None)
    finally:
        await executor.close()
    answer = {"status": outcome.status.value, "error": outcome.error}
    print(json.dumps(answer | {"http_status": outcome.http_status}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2]), sys.argv[3] == "warm"))
