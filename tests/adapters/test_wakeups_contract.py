"""The TaskStore contract of wake-ups: changes and cancel requests wake every engine."""

from __future__ import annotations

import asyncio

from application.ports import TaskStore
from tests.adapters.contract_support import T0, claim_one
from tests.adapters.contract_support import store as store  # the fixture
from tests.fixtures.backends import Backend
from tests.fixtures.tasks import make_task


async def test_mutations_and_cancel_requests_wake_the_engines(
    backend: Backend, store: TaskStore
) -> None:
    wakers = [await backend.new_waker() for _ in range(2)]
    try:
        for waker in wakers:
            await waker.start()
        task = await store.create_task(make_task())
        for waker in wakers:
            await asyncio.wait_for(waker.wait(), 5)
        run = await claim_one(store, T0)
        await store.request_cancel(run.id)
        for waker in wakers:
            await asyncio.wait_for(waker.wait(), 5)
        await store.update_task(task.model_copy(update={"description": "d"}), 1, reschedule=False)
        for waker in wakers:
            await asyncio.wait_for(waker.wait(), 5)
    finally:
        for waker in wakers:
            await waker.close()
