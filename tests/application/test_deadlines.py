"""`deadline`: a time limit that reads what arrived before it stops a wait."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from application.deadlines import deadline


async def test_what_arrived_while_the_process_was_frozen_is_read_before_the_limit() -> None:
    """The data and the expired timer come in the same turn of the event loop when the
    process wakes; `asyncio.timeout` would cancel the wait for the data first."""
    loop = asyncio.get_running_loop()
    reader, writer = socket.socketpair()
    reader.setblocking(False)

    def answer_while_frozen() -> None:
        writer.send(b"answer")
        time.sleep(0.3)  # the whole event loop stops, past the limit

    loop.call_later(0.05, answer_while_frozen)
    try:
        async with deadline(0.2):
            data = await loop.sock_recv(reader, 16)
    finally:
        reader.close()
        writer.close()
    assert data == b"answer"


async def test_a_wait_that_nothing_answers_is_stopped() -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        async with deadline(0.05):
            await asyncio.sleep(10)
    assert time.monotonic() - started < 5


async def test_no_limit_and_a_block_that_ends_in_time() -> None:
    async with deadline(None):
        await asyncio.sleep(0.01)
    async with deadline(5):
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # nothing fires after the block


async def test_a_cancel_from_outside_is_not_taken_for_the_limit() -> None:
    async def wait() -> None:
        async with deadline(5):
            await asyncio.sleep(10)

    task = asyncio.create_task(wait())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_limit_already_past_stops_at_once() -> None:
    """A budget spent before the call began (it waited for a slot): due at once, a few
    turns of the event loop later, not after some time of grace."""
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        async with deadline(-5):
            await asyncio.sleep(10)
    assert time.monotonic() - started < 1
