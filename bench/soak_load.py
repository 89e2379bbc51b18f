"""The soak's API client: what a user does through the API while faults go on.

It creates, reads, lists, changes (interval and cron triggers), pauses, resumes, fires,
cancels and backfills tasks of its own, and cancels backfills (`api-…`, outside the
occurrence accounting) on whichever replicas are up, and counts
every answer by request kind and status ("unreachable" for a replica that did not
answer at all). The names of creates answered 503 are kept, to see afterwards whether
any of them was written.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx

TIMEOUT = 5.0
NO_SUCH_ID = "00000000-0000-4000-8000-000000000000"  # a 404, while nothing of its kind exists


class ApiLoad:
    def __init__(self, urls: Callable[[], list[str]], target_url: str, seed: int) -> None:
        self._urls = urls  # the replicas up now
        self._target = target_url
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._tasks: list[str] = []
        self._runs: list[str] = []
        self._backfills: list[str] = []
        self._made = 0
        self.answers: Counter[tuple[str, str]] = Counter()
        self.unavailable_creates: list[str] = []
        self.unavailable_at: list[tuple[float, str]] = []  # (time.time(), kind) of each 503

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _loop(self) -> None:
        with httpx.Client(timeout=TIMEOUT) as client:
            while not self._stop.wait(0.05):
                urls = self._urls()
                if urls:
                    self._one(client, self._rng.choice(urls))

    def _one(self, client: httpx.Client, api: str) -> None:
        kinds = ["list", "read", "create", "change", "pause", "resume", "fire", "cancel",
                 "backfill", "cancel_backfill"]  # fmt: skip
        weights = [3, 3, 2, 2, 1, 1, 2, 1, 1, 1]
        if len(self._tasks) > 20:
            kinds.append("delete")
            weights.append(2)
        kind = self._rng.choices(kinds, weights)[0]
        if not self._tasks and kind not in ("list", "create"):
            kind = "create"
        task = self._rng.choice(self._tasks) if self._tasks else ""
        name = ""
        try:
            if kind == "list":
                response = client.get(f"{api}/tasks", params={"limit": 20})
            elif kind == "read":
                response = client.get(f"{api}/tasks/{task}")
            elif kind == "create":
                self._made += 1
                name = f"api-{self._made}"
                response = client.post(f"{api}/tasks", json=self._spec(name))
            elif kind == "change":
                response = client.patch(f"{api}/tasks/{task}", json={"trigger": self._trigger()})
            elif kind == "backfill":
                end = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
                body = {"start": (end - timedelta(seconds=20)).isoformat(),
                        "end": end.isoformat(), "overlap": "allow_all"}  # fmt: skip
                response = client.post(f"{api}/tasks/{task}/backfill", json=body)
            elif kind == "cancel_backfill":
                some = self._backfills[-1] if self._backfills else NO_SUCH_ID
                response = client.post(f"{api}/backfills/{some}/cancel")
            elif kind in ("pause", "resume"):
                response = client.post(f"{api}/tasks/{task}/{kind}")
            elif kind == "fire":
                response = client.post(f"{api}/tasks/{task}/runs")
            elif kind == "cancel":
                run = self._runs[-1] if self._runs else NO_SUCH_ID
                response = client.post(f"{api}/runs/{run}/cancel")
            else:
                response = client.delete(f"{api}/tasks/{task}")
        except httpx.TransportError:
            self.answers[(kind, "unreachable")] += 1
            return
        self.answers[(kind, str(response.status_code))] += 1
        if response.status_code == 503:
            self.unavailable_at.append((time.time(), kind))
            if name:
                self.unavailable_creates.append(name)
        if kind == "create" and response.status_code == 201:
            self._tasks.append(response.json()["id"])
        elif kind == "fire" and response.status_code == 202:
            self._runs = [*self._runs[-20:], response.json()["id"]]
        elif kind == "backfill" and response.status_code == 202:
            self._backfills = [*self._backfills[-20:], response.json()["backfill_id"]]
        elif kind == "delete" and response.status_code == 204:
            self._tasks.remove(task)

    def _trigger(self) -> dict[str, object]:
        if self._rng.random() < 0.3:
            return {"kind": "cron", "expression": f"*/{self._rng.randint(2, 6)} * * * * *"}
        return {"kind": "interval", "every": self._rng.randint(2, 6)}

    def _spec(self, name: str) -> dict[str, object]:
        return {
            "name": name,
            "trigger": self._trigger(),
            "target": {"url": f"{self._target}/ok/api", "timeout_seconds": 2},
            "misfire_grace_seconds": 30,
        }
