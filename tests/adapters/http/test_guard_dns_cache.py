"""The guard's DNS cache: one lookup per name for new connections, checked at every use."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from adapters.http import HttpExecutorSettings, OutboundDenied, OutboundGuard
from adapters.http.guard import ResolutionFailed
from tests.adapters.http.builders import FakeResolver, http_task, make_run
from tests.adapters.http.conftest import MakeExecutor
from tests.adapters.http.scripted_server import CLOSE, ScriptedServer


async def test_new_connections_to_a_name_ask_dns_once(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    server.answer = lambda _: (CLOSE, True)  # a new connection for every call
    resolver = FakeResolver({"target.test": ["127.0.0.1"]})
    executor = make_executor(resolver=resolver)
    task = http_task(f"http://target.test:{server.port}/")

    for _ in range(3):
        assert (await executor.execute(task, make_run(task), None)).error is None

    assert server.connections == 3
    assert resolver.lookups == ["target.test"]


async def test_without_the_cache_every_connection_asks_dns(
    make_executor: MakeExecutor, server: ScriptedServer
) -> None:
    server.answer = lambda _: (CLOSE, True)
    resolver = FakeResolver({"target.test": ["127.0.0.1"]})
    executor = make_executor(HttpExecutorSettings(dns_cache_seconds=0), resolver=resolver)
    task = http_task(f"http://target.test:{server.port}/")

    for _ in range(2):
        assert (await executor.execute(task, make_run(task), None)).error is None

    assert resolver.lookups == ["target.test", "target.test"]


async def test_a_cached_answer_is_checked_at_every_use() -> None:
    resolver = FakeResolver({"mixed.test": ["127.0.0.1", "169.254.169.254"]})
    guard = OutboundGuard(resolver=resolver, cache_seconds=60)

    for _ in range(2):
        with pytest.raises(OutboundDenied, match=r"169\.254\.169\.254"):
            await guard.resolve("mixed.test", 80)

    assert resolver.lookups == ["mixed.test"]


async def test_the_cache_is_per_name_and_expires() -> None:
    resolver = FakeResolver({"a.test": ["10.0.0.1"], "b.test": ["10.0.0.2"]})
    guard = OutboundGuard(resolver=resolver, cache_seconds=0.05)

    assert await guard.resolve("a.test", 80) == [ipaddress.ip_address("10.0.0.1")]
    assert await guard.resolve("A.TEST.", 443) == [ipaddress.ip_address("10.0.0.1")]
    assert await guard.resolve("b.test", 80) == [ipaddress.ip_address("10.0.0.2")]
    await asyncio.sleep(0.1)
    await guard.resolve("a.test", 80)

    assert resolver.lookups == ["a.test", "b.test", "a.test"]


async def test_a_failed_lookup_is_not_cached() -> None:
    resolver = FakeResolver({})
    guard = OutboundGuard(resolver=resolver, cache_seconds=60)

    with pytest.raises(ResolutionFailed):
        await guard.resolve("late.test", 80)
    resolver.table["late.test"] = ["10.0.0.3"]

    assert await guard.resolve("late.test", 80) == [ipaddress.ip_address("10.0.0.3")]
    assert resolver.lookups == ["late.test", "late.test"]


async def test_concurrent_lookups_of_one_name_are_shared() -> None:
    lookups: list[str] = []
    release = asyncio.Event()

    async def slow_resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        await release.wait()
        return ["10.0.0.4"]

    guard = OutboundGuard(resolver=slow_resolver, cache_seconds=60)
    calls = [asyncio.create_task(guard.resolve("slow.test", 80)) for _ in range(5)]
    await asyncio.sleep(0.01)
    calls[0].cancel()  # one caller giving up does not end the lookup for the others
    release.set()
    answers = await asyncio.gather(*calls[1:])

    assert answers == [[ipaddress.ip_address("10.0.0.4")]] * 4
    assert lookups == ["slow.test"]
