"""HostChecks: the guard's verdict on a URL's host, given when a task is written and
remembered, must be the same verdict every time, named after the field that asked."""

from __future__ import annotations

import pytest

from adapters.http.guard import OutboundGuard
from adapters.http.host_checks import HostChecks
from domain.errors import InvalidRequest


def test_a_denied_host_is_denied_every_time_under_the_field_that_asks() -> None:
    checks = HostChecks(OutboundGuard(deny=["evil.test"]))
    for field in ("target.url", "notify.url", "target.url"):
        with pytest.raises(InvalidRequest) as raised:
            checks.check(field, "https://evil.test/hook")
        assert raised.value.field == field
        assert "evil.test" in str(raised.value)


def test_an_allowed_host_passes_every_time_and_a_template_waits_for_its_host() -> None:
    checks = HostChecks(OutboundGuard(deny=["10.0.0.0/8"]))
    for _ in range(2):
        checks.check("target.url", "https://api.example/hook")
        checks.check("target.url", "https://{{ host }}/hook", templated=True)
    # A template's host is judged once rendered: even a denied one passes here.
    checks.check("target.url", "https://10.0.0.{{ n }}/hook", templated=True)


def test_a_literal_address_in_a_denied_range_is_denied() -> None:
    checks = HostChecks(OutboundGuard(deny=["10.0.0.0/8"]))
    with pytest.raises(InvalidRequest):
        checks.check("target.url", "http://10.1.2.3/")
    checks.check("target.url", "http://192.0.2.1/")


def test_every_path_of_a_host_the_client_cannot_encode_is_refused() -> None:
    checks = HostChecks(OutboundGuard())
    for url in ("http://xn--/a", "http://xn--/b?q=1", "http://xn--:80/"):
        with pytest.raises(InvalidRequest, match="not a URL the HTTP client accepts"):
            checks.check("target.url", url)
    # A template whose braces are in its path still names its host: it is judged.
    with pytest.raises(InvalidRequest, match="not a URL the HTTP client accepts"):
        checks.check("target.url", "http://xn--/{{ task.name }}", templated=True)


def test_a_control_character_anywhere_is_refused_though_its_host_passed() -> None:
    checks = HostChecks(OutboundGuard())
    checks.check("target.url", "http://api.example/ok")
    with pytest.raises(InvalidRequest, match="non-printable"):
        checks.check("target.url", "http://api.example/a\tb")
    checks.check("target.url", "http://api.example/a%09b")
