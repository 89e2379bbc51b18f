"""The outbound guard's verdict on the host of a URL a task or a destination names,
given when the task is written (a call judges again, after DNS: the transport's guard).

The verdict depends only on the URL's scheme and authority (unless it holds a control
character, which the HTTP client refuses wherever it is) and on the guard's allow and
deny lists, which are fixed for the executor's life, so it is remembered by scheme and
authority: 10,000 tasks calling paths of one host are judged once (httpx's URL parser is
the dear part, about a tenth of a create's CPU when every URL was judged whole).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import httpx

from adapters.http.guard import OutboundDenied, OutboundGuard
from adapters.http.requests import parse_url
from domain.errors import InvalidRequest

# What httpx refuses anywhere in a URL (its "non-printable ASCII character").
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# URLs whose verdict is kept; the memory is dropped whole when full (a URL is at most
# 4,096 characters, and most are short).
REMEMBERED = 16_384


class HostChecks:
    def __init__(self, guard: OutboundGuard) -> None:
        self._guard = guard
        self._verdicts: dict[tuple[str, bool], str | None] = {}

    def check(self, field: str, url: str, *, templated: bool = False) -> None:
        """Raises InvalidRequest naming `field` when the call could reach a denied host,
        or when the HTTP client would not accept the URL."""
        key = (_judged_part(url), templated)
        try:
            problem = self._verdicts[key]
        except KeyError:
            problem = self._judge(key[0], templated)
            if len(self._verdicts) >= REMEMBERED:
                self._verdicts.clear()
            self._verdicts[key] = problem
        if problem is not None:
            raise InvalidRequest(field, problem)

    def _judge(self, url: str, templated: bool) -> str | None:
        """Judge the host as the call will see it: the HTTP client's parsing of the URL
        (the transport hands the guard exactly that host), and the standard library's
        too, so that no reading of the URL names a denied address."""
        try:
            host = urlsplit(url).hostname
            if host:
                self._guard.check_static(host)
            if templated and "{" in url:
                return None  # the host is known only once rendered; the transport judges it
            try:
                parsed = parse_url(url)
                parsed.host  # noqa: B018 - its host decoded as a request will (IDNA)
            except (httpx.InvalidURL, UnicodeError) as exc:  # idna's errors are UnicodeErrors
                return f"is not a URL the HTTP client accepts: {exc}"
            raw_host = parsed.raw_host.decode("ascii")
            if raw_host and raw_host != host:  # the same host was judged just above
                self._guard.check_static(raw_host)
        except OutboundDenied as exc:
            return str(exc)
        return None


def _judged_part(url: str) -> str:
    """What of `url` the verdict depends on: `scheme://authority/`. For an absolute URL
    of printable characters the HTTP client's parse can fail only on its authority (the
    host's encoding, the port), and the path, query and fragment name no host. A URL
    with a control character is judged whole (the client refuses it, naming where)."""
    if _CONTROL.search(url):
        return url
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/"
