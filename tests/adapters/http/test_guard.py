"""The outbound guard: every resolved address checked, defaults, allow and deny lists."""

from __future__ import annotations

import ipaddress

import pytest

from adapters.http import HttpExecutor, HttpExecutorSettings, OutboundDenied, OutboundGuard
from domain.errors import InvalidRequest
from domain.runs import RunStatus
from domain.tasks import HttpTarget
from tests.adapters.http.builders import FAST_RETRY, FakeResolver, http_task, make_run
from tests.adapters.http.conftest import MakeExecutor
from tests.fixtures.target import RecordingTarget

DEFAULT = OutboundGuard()
DENY = OutboundGuard(deny=["10.0.0.0/8", "evil.test", "2001:db8::/32"])
ALLOW = OutboundGuard(allow=["192.168.0.0/16", "api.test"])
ALLOW_METADATA = OutboundGuard(allow=["169.254.169.254/32"])
BOTH = OutboundGuard(allow=["10.0.0.0/8"], deny=["10.9.0.0/16"])


@pytest.mark.parametrize(
    ("guard", "host", "address", "allowed"),
    [
        pytest.param(DEFAULT, "x.test", "169.254.169.254", False, id="metadata-v4"),
        pytest.param(DEFAULT, "x.test", "169.254.1.1", False, id="link-local-v4"),
        pytest.param(DEFAULT, "x.test", "fe80::1", False, id="link-local-v6"),
        pytest.param(DEFAULT, "x.test", "fe80::1%eth0", False, id="link-local-v6-scoped"),
        pytest.param(DEFAULT, "x.test", "fd00:ec2::254", False, id="metadata-v6"),
        pytest.param(DEFAULT, "x.test", "::ffff:169.254.169.254", False, id="mapped-v4"),
        pytest.param(DEFAULT, "x.test", "64:ff9b::a9fe:a9fe", False, id="nat64-v4"),
        pytest.param(DEFAULT, "x.test", "127.0.0.1", True, id="loopback"),
        pytest.param(DEFAULT, "x.test", "::1", True, id="loopback-v6"),
        pytest.param(DEFAULT, "x.test", "10.1.2.3", True, id="private"),
        pytest.param(DEFAULT, "x.test", "fd00:ec2::253", True, id="next-to-metadata-v6"),
        pytest.param(DEFAULT, "x.test", "93.184.216.34", True, id="public"),
        pytest.param(DENY, "x.test", "10.1.2.3", False, id="deny-network"),
        pytest.param(DENY, "x.test", "::ffff:10.1.2.3", False, id="deny-network-mapped"),
        pytest.param(DENY, "x.test", "2001:db8::1", False, id="deny-network-v6"),
        pytest.param(DENY, "evil.test", "127.0.0.1", False, id="deny-name"),
        pytest.param(DENY, "EVIL.test.", "127.0.0.1", False, id="deny-name-normalized"),
        pytest.param(DENY, "x.test", "127.0.0.1", True, id="deny-other"),
        pytest.param(ALLOW, "x.test", "192.168.1.1", True, id="allow-network"),
        pytest.param(ALLOW, "x.test", "127.0.0.1", False, id="allow-network-only"),
        pytest.param(ALLOW, "api.test", "127.0.0.1", True, id="allow-name"),
        pytest.param(ALLOW, "api.test", "169.254.169.254", False, id="allowed-name-no-metadata"),
        pytest.param(ALLOW_METADATA, "x.test", "169.254.169.254", True, id="allow-lifts-default"),
        pytest.param(ALLOW_METADATA, "x.test", "169.254.169.253", False, id="allow-exact"),
        pytest.param(BOTH, "x.test", "10.1.2.3", True, id="allowed-not-denied"),
        pytest.param(BOTH, "x.test", "10.9.2.3", False, id="deny-wins"),
    ],
)
def test_check_address(guard: OutboundGuard, host: str, address: str, allowed: bool) -> None:
    checked = ipaddress.ip_address(address)
    if allowed:
        guard.check_address(host, checked)
    else:
        with pytest.raises(OutboundDenied, match=r"^outbound guard denied "):
            guard.check_address(host, checked)


async def test_every_resolved_address_is_checked() -> None:
    resolver = FakeResolver({"mixed.test": ["127.0.0.1", "169.254.169.254"]})
    guard = OutboundGuard(resolver=resolver)

    with pytest.raises(OutboundDenied) as denied:
        await guard.resolve("mixed.test", 80)

    assert str(denied.value) == (
        "outbound guard denied mixed.test (169.254.169.254): "
        "link-local and cloud metadata addresses are denied"
    )


async def test_a_literal_address_is_not_resolved() -> None:
    resolver = FakeResolver({})
    guard = OutboundGuard(resolver=resolver)

    assert await guard.resolve("[::1]", 80) == [ipaddress.ip_address("::1")]
    assert resolver.lookups == []


async def test_a_name_resolving_to_metadata_fails_the_run(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    resolver = FakeResolver({"metadata.test": ["169.254.169.254"]})
    executor = make_executor(resolver=resolver)
    task = http_task("http://metadata.test/latest/meta-data/", retry=FAST_RETRY)

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.FAILED
    assert outcome.attempts == 1  # a refusal is final, not retried
    assert outcome.error == (
        "outbound guard denied metadata.test (169.254.169.254): "
        "link-local and cloud metadata addresses are denied"
    )


async def test_a_literal_metadata_address_fails_the_run(executor: HttpExecutor) -> None:
    # check() rejects this at create; a task stored before the rule still never calls.
    task = http_task("http://169.254.169.254/latest/meta-data/")

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.error is not None and outcome.error.startswith("outbound guard denied")


async def test_the_allow_list_in_the_executor(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    executor = make_executor(HttpExecutorSettings(allow=("10.0.0.0/8",)))
    task = http_task(recording_target.url("/"))

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.error == "outbound guard denied 127.0.0.1: not on the allow list"
    assert recording_target.received() == []


async def test_the_deny_list_in_the_executor(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    executor = make_executor(HttpExecutorSettings(deny=("127.0.0.0/8",)))
    task = http_task(recording_target.url("/"))

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.error == "outbound guard denied 127.0.0.1: on the deny list"
    assert recording_target.received() == []


async def test_the_guard_covers_the_oauth2_token_url(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    resolver = FakeResolver({"idp.test": ["fe80::1"]})
    executor = make_executor(environ={"SECRET": "client-secret"}, resolver=resolver)
    task = http_task(
        recording_target.url("/"),
        auth={
            "type": "oauth2_client_credentials",
            "token_url": "https://idp.test/token",
            "client_id": "c",
            "client_secret_env": "SECRET",
        },
    )

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.error == (
        "oauth2 token request to https://idp.test/token failed: outbound guard denied "
        "idp.test (fe80::1): link-local and cloud metadata addresses are denied"
    )
    assert recording_target.received() == []


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]:8080/",
        "http://[fd00:ec2::254]/",
        "http://[::ffff:169.254.169.254]/",
    ],
)
def test_check_rejects_a_denied_literal_url(executor: HttpExecutor, url: str) -> None:
    with pytest.raises(InvalidRequest) as rejected:
        executor.check(HttpTarget(url=url))

    assert rejected.value.field == "target.url"
    assert "outbound guard denied" in rejected.value.message


def test_check_rejects_a_denied_literal_token_url(executor: HttpExecutor) -> None:
    target = HttpTarget.model_validate(
        {
            "url": "http://127.0.0.1/",
            "auth": {
                "type": "oauth2_client_credentials",
                "token_url": "http://169.254.169.254/token",
                "client_id": "c",
                "client_secret_env": "S",
            },
        }
    )

    with pytest.raises(InvalidRequest) as rejected:
        executor.check(target)

    assert rejected.value.field == "target.auth.token_url"


def test_check_rejects_a_denied_name(make_executor: MakeExecutor) -> None:
    executor = make_executor(HttpExecutorSettings(deny=("internal.test",)))

    with pytest.raises(InvalidRequest, match="on the deny list"):
        executor.check(HttpTarget(url="https://internal.test/x"))


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8080/", "https://reports.internal/run", "http://10.0.0.1/"]
)
def test_check_accepts_what_the_guard_allows_or_cannot_know(
    executor: HttpExecutor, url: str
) -> None:
    executor.check(HttpTarget(url=url))
