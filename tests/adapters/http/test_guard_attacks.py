"""The outbound guard under attack: numeric spellings of denied addresses, IPv6 forms
that embed them, DNS rebinding and redirects (docs/api.md, "The outbound guard")."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence

import pytest

from adapters.http import HttpExecutor, HttpExecutorSettings, OutboundDenied, OutboundGuard
from adapters.http.guard import parse_literal
from domain.errors import InvalidRequest
from domain.runs import RunStatus
from domain.tasks import HttpTarget
from tests.adapters.http.builders import FakeResolver, http_task, make_run
from tests.adapters.http.conftest import MakeExecutor
from tests.fixtures.target import RecordingTarget, Response

METADATA = ipaddress.ip_address("169.254.169.254")
# Every way of writing 169.254.169.254 that a URL parser (WHATWG, inet_aton) reads as it.
METADATA_SPELLINGS = [
    pytest.param("0251.0376.0251.0376", id="octal"),
    pytest.param("2852039166", id="decimal"),
    pytest.param("0xa9fea9fe", id="hex"),
    pytest.param("0xA9.0xFE.0xA9.0xFE", id="hex-parts"),
    pytest.param("169.254.43518", id="three-parts"),
    pytest.param("169.16689662", id="two-parts"),
    pytest.param("0251.254.0xa9.254", id="mixed"),
    pytest.param("169.254.169.254.", id="trailing-dot"),
    pytest.param("%31%36%39.254.169.254", id="percent-escaped"),
]


@pytest.mark.parametrize("host", METADATA_SPELLINGS)
def test_numeric_spellings_are_read_as_the_address(host: str) -> None:
    assert parse_literal(host) == METADATA


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("0x7f.1", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("10.1", "10.0.0.1"),
        ("[::ffff:169.254.169.254]", "::ffff:169.254.169.254"),
    ],
)
def test_other_numeric_spellings(host: str, address: str) -> None:
    assert parse_literal(host) == ipaddress.ip_address(address)


@pytest.mark.parametrize("host", ["example.com", "0x.example", "1.2.3.4.example", "09a.test"])
def test_host_names_are_not_addresses(host: str) -> None:
    assert parse_literal(host) is None


@pytest.mark.parametrize("host", ["1.2.3.4.5", "1.2.3.256", "4294967296", "09", "a.0x10"])
def test_a_host_ending_in_a_number_that_is_no_address_is_refused(host: str) -> None:
    with pytest.raises(OutboundDenied, match="ends in a number but is not an IPv4 address"):
        OutboundGuard().check_static(host)


@pytest.mark.parametrize("host", METADATA_SPELLINGS)
def test_check_refuses_a_denied_address_in_any_spelling(executor: HttpExecutor, host: str) -> None:
    with pytest.raises(InvalidRequest) as rejected:
        executor.check(HttpTarget(url=f"http://{host}/latest/meta-data/"))

    assert rejected.value.field == "target.url"
    assert re.search(
        r"169\.254\.169\.254\)?: link-local and cloud metadata addresses are denied$",
        rejected.value.message,
    )


@pytest.mark.parametrize(
    "host",
    [
        "[::ffff:169.254.169.254]",
        "[::ffff:a9fe:a9fe]",
        "[::169.254.169.254]",
        "[2002:a9fe:a9fe::1]",
        "[64:ff9b::169.254.169.254]",
    ],
)
def test_check_refuses_ipv6_forms_embedding_a_denied_address(
    executor: HttpExecutor, host: str
) -> None:
    with pytest.raises(InvalidRequest, match="link-local and cloud metadata") as rejected:
        executor.check(HttpTarget(url=f"http://{host}/"))

    assert rejected.value.field == "target.url"


def test_check_refuses_a_denied_numeric_oauth2_token_url(executor: HttpExecutor) -> None:
    target = HttpTarget.model_validate(
        {
            "url": "http://127.0.0.1/",
            "auth": {
                "type": "oauth2_client_credentials",
                "token_url": "http://2852039166/token",
                "client_id": "c",
                "client_secret_env": "S",
            },
        }
    )

    with pytest.raises(InvalidRequest) as rejected:
        executor.check(target)

    assert rejected.value.field == "target.auth.token_url"


def test_check_refuses_a_url_the_http_client_cannot_call(executor: HttpExecutor) -> None:
    # Octal parts of an allowed address: URL parsers read 127.0.0.1, the HTTP client
    # refuses the URL; stored, every run would fail.
    with pytest.raises(InvalidRequest, match="not a URL the HTTP client accepts") as rejected:
        executor.check(HttpTarget(url="http://0177.0.0.01/"))

    assert rejected.value.field == "target.url"


async def test_a_rendered_numeric_spelling_is_denied_without_asking_dns(
    make_executor: MakeExecutor,
) -> None:
    resolver = FakeResolver({})
    executor = make_executor(resolver=resolver)
    task = http_task("http://{{ task.tags | first }}/", template=True, tags=["0xa9fea9fe"])

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.FAILED
    assert outcome.error == (
        "outbound guard denied 0xa9fea9fe (169.254.169.254): "
        "link-local and cloud metadata addresses are denied"
    )
    assert resolver.lookups == []


@pytest.mark.parametrize("host", ["2130706433", "0x7f.1", "127.1"])
async def test_an_allowed_numeric_spelling_calls_the_address_it_was_judged_as(
    make_executor: MakeExecutor, recording_target: RecordingTarget, host: str
) -> None:
    resolver = FakeResolver({})
    executor = make_executor(resolver=resolver)
    port = recording_target.base_url.rsplit(":", 1)[1]
    target = HttpTarget(url=f"http://{host}:{port}/numeric")
    executor.check(target)
    task = http_task(target.url)

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.status is RunStatus.SUCCEEDED
    assert len(recording_target.received("/numeric")) == 1
    assert resolver.lookups == []  # the spelling was never handed to DNS


class RebindingResolver:
    """A name whose answers change between lookups: first `first`, then `then`."""

    def __init__(self, first: Sequence[str], then: Sequence[str]) -> None:
        self.answers = [list(first), list(then)]
        self.lookups = 0

    async def __call__(self, host: str, port: int) -> list[str]:
        self.lookups += 1
        return self.answers[min(self.lookups, 2) - 1]


async def test_dns_rebinding_never_reaches_a_denied_address(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    resolver = RebindingResolver(first=["127.0.0.1"], then=["169.254.169.254"])
    executor = make_executor(HttpExecutorSettings(dns_cache_seconds=0), resolver=resolver)
    # Each answer closes its connection, so the next call connects (and resolves) again.
    recording_target.respond("/", Response(headers={"Connection": "close"}))
    port = recording_target.base_url.rsplit(":", 1)[1]
    task = http_task(f"http://rebind.test:{port}/")

    first = await executor.execute(task, make_run(task), None)
    second = await executor.execute(task, make_run(task), None)

    assert first.status is RunStatus.SUCCEEDED
    assert second.status is RunStatus.FAILED
    assert second.error == (
        "outbound guard denied rebind.test (169.254.169.254): "
        "link-local and cloud metadata addresses are denied"
    )
    assert resolver.lookups == 2  # one lookup per connection: what was checked is used
    assert len(recording_target.received()) == 1


async def test_a_rebinding_answer_mixing_addresses_is_refused_whole(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    resolver = RebindingResolver(first=["127.0.0.1", "169.254.169.254"], then=["127.0.0.1"])
    executor = make_executor(HttpExecutorSettings(dns_cache_seconds=0), resolver=resolver)
    port = recording_target.base_url.rsplit(":", 1)[1]
    task = http_task(f"http://rebind.test:{port}/")

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.error is not None and "(169.254.169.254)" in outcome.error
    assert recording_target.received() == []


async def test_a_redirect_to_a_denied_address_is_not_followed(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    resolver = FakeResolver({"metadata.test": ["169.254.169.254"]})
    executor = make_executor(resolver=resolver)
    for location in ("http://169.254.169.254/latest/meta-data/", "http://metadata.test/"):
        recording_target.respond("/", Response(307, b"", {"Location": location}))
        task = http_task(recording_target.url("/"))

        outcome = await executor.execute(task, make_run(task), None)

        # Redirects are never followed: the 3xx is the run's answer.
        assert (outcome.status, outcome.http_status) == (RunStatus.FAILED, 307)
    assert resolver.lookups == []


@pytest.mark.parametrize(
    "host",
    [
        "0.0.0.0",
        "0",
        "0x0",
        "0.0.0.1",
        "[::]",
        "[::ffff:0.0.0.0]",
        "[::ffff:0:0]",
        "127.0.0.2",
        "2130706434",
        "[::ffff:127.0.0.2]",
    ],
)
@pytest.mark.parametrize("deny", ["127.0.0.1/32,::1/128", "127.0.0.0/8", "::1"])
def test_an_address_of_this_host_or_of_loopback_is_denied_with_loopback(
    make_executor: MakeExecutor, host: str, deny: str
) -> None:
    # A connection to 0.0.0.0, ::, or any of 127/8 reaches this machine as one to
    # 127.0.0.1 or ::1 does: a deny list naming loopback in either family covers them.
    executor = make_executor(HttpExecutorSettings(deny=tuple(deny.split(","))))

    with pytest.raises(InvalidRequest, match="on the deny list") as rejected:
        executor.check(HttpTarget(url=f"http://{host}:9/"))

    assert rejected.value.field == "target.url"


async def test_a_call_to_this_host_is_denied_with_loopback(
    make_executor: MakeExecutor, recording_target: RecordingTarget
) -> None:
    executor = make_executor(HttpExecutorSettings(deny=("127.0.0.1/32", "::1/128")))
    port = recording_target.url("/").split(":")[2].split("/")[0]
    task = http_task(f"http://0.0.0.0:{port}/")

    outcome = await executor.execute(task, make_run(task), None)

    assert outcome.error == "outbound guard denied 0.0.0.0: on the deny list"
    assert recording_target.received() == []


def test_an_allow_list_naming_one_loopback_address_allows_no_other() -> None:
    guard = OutboundGuard(allow=["127.0.0.1/32"])

    guard.check_static("127.0.0.1")
    with pytest.raises(OutboundDenied, match="not on the allow list"):
        guard.check_static("127.0.0.2")
    with pytest.raises(OutboundDenied, match="not on the allow list"):
        guard.check_static("0.0.0.0")
