"""The run-ending calls of the `TaskStore` port, written once for every store.

A store writes two things: `_finish_runs` (record outcomes) and `_expire_lost_runs`
(fail the runs whose lease expired), each told whether to start the queued runs the
freed slots allow in the same transaction (`starting`: when, and on which replica).
The four port calls are those two with and without `starting` (application/store_ports.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from application.ports import Freed
from domain.runs import Run, RunOutcome

# When, and by which replica, the queued runs a freed slot allows are started.
Starting = tuple[datetime, str] | None


class RunEndsBase(ABC):
    """`finish_runs`, `finish_runs_starting`, `expire_lost_runs` and
    `expire_lost_runs_starting` on a store's two ways of ending runs."""

    @abstractmethod
    async def _finish_runs(
        self, outcomes: Sequence[tuple[UUID, RunOutcome]], starting: Starting
    ) -> Freed: ...

    @abstractmethod
    async def _expire_lost_runs(self, now: datetime, starting: Starting) -> Freed: ...

    async def finish_runs(self, outcomes: Sequence[tuple[UUID, RunOutcome]]) -> list[Run]:
        return (await self._finish_runs(outcomes, None)).runs

    async def finish_runs_starting(
        self, outcomes: Sequence[tuple[UUID, RunOutcome]], now: datetime, replica: str
    ) -> Freed:
        return await self._finish_runs(outcomes, (now, replica))

    async def expire_lost_runs(self, now: datetime) -> list[Run]:
        return (await self._expire_lost_runs(now, None)).runs

    async def expire_lost_runs_starting(self, now: datetime, replica: str) -> Freed:
        return await self._expire_lost_runs(now, (now, replica))
