"""The outbound guard: which addresses a target may be called at (docs/api.md, "The
outbound guard").

Every address a host resolves to is checked, and the transport then connects only to
those checked addresses, so a name cannot resolve to an allowed address for the check
and to a metadata address for the connection (DNS rebinding).

A guard may keep what a name resolved to for a few seconds (`cache_seconds`), so that
a burst of new connections to one host asks DNS once; the addresses are checked again
each time they are handed out, so a cached answer is never used unchecked.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# (host, port) -> the addresses it resolves to, as strings.
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

# Link-local networks (where cloud metadata services live) and AWS's IPv6 metadata address.
DEFAULT_DENY: tuple[Network, ...] = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
    ipaddress.ip_network("fd00:ec2::254/128"),
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated IPv4-compatible ::a.b.c.d
# "This host": a connection to 0.0.0.0 (or to ::), or to any loopback address
# (127.0.0.0/8), reaches this machine as one to 127.0.0.1 or ::1 does.
_THIS_HOST = ipaddress.ip_network("0.0.0.0/8")
_LOOPBACKS = (ipaddress.IPv4Address("127.0.0.1"), ipaddress.IPv6Address("::1"))
# A resolution cache holding more names than this drops its stale entries.
_MAX_CACHED_NAMES = 1024


class OutboundDenied(Exception):
    """The guard refused a call; the message names the guard, the host and why."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"outbound guard denied {host}: {reason}")
        self.host = host
        self.reason = reason


class ResolutionFailed(Exception):
    """The host name did not resolve (a DNS failure)."""

    def __init__(self, host: str, detail: str) -> None:
        super().__init__(f"DNS lookup of {host!r} failed: {detail}")
        self.host = host


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class _Rules:
    names: frozenset[str]
    networks: tuple[Network, ...]

    @classmethod
    def parse(cls, entries: Iterable[str]) -> _Rules:
        names: set[str] = set()
        networks: list[Network] = []
        for entry in entries:
            try:
                networks.append(ipaddress.ip_network(entry.strip(), strict=False))
            except ValueError:
                names.add(normalize_host(entry))
        return cls(frozenset(names), tuple(networks))

    def __bool__(self) -> bool:
        return bool(self.names or self.networks)

    def covers(self, forms: Sequence[Address]) -> bool:
        return any(form in network for form in forms for network in self.networks)


def normalize_host(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


# A pure function of the host, asked about the same few hosts by every target check (an
# apply checks thousands): `ipaddress` parsing each again cost a tenth of an apply.
@functools.lru_cache(maxsize=1024)
def parse_literal(host: str) -> Address | None:
    """The address `host` spells, in any spelling a URL parser reads as one: an IP
    literal, or a numeric IPv4 form (`0251.0376.0251.0376`, `2852039166`, `0xa9fea9fe`,
    `169.254.43518`). Raises ValueError for a host that ends in a number but spells no
    address (`1.2.3.4.5`): URL parsers refuse it, resolvers may not."""
    name = normalize_host(host)
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        pass
    # WHATWG URL parsing decodes a host's percent escapes before reading it.
    return _ipv4_reading(unquote(name))


def _ipv4_reading(name: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address the WHATWG URL Standard's IPv4 parser reads `name` as (the
    reading of browsers, curl and C's inet_aton): one to four dot-separated numbers,
    each decimal, octal after a leading 0 or hexadecimal after 0x, the last filling the
    remaining bytes. None when `name` does not end in a number (a host name)."""
    parts = name.split(".")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()
    if not (parts[-1].isascii() and parts[-1].isdigit()) and _number(parts[-1]) is None:
        return None
    numbers = [_number(part) for part in parts]
    if len(parts) > 4 or any(number is None for number in numbers):
        raise ValueError(f"{name!r} ends in a number but is not an IPv4 address")
    *leading, last = [number for number in numbers if number is not None]
    if any(number > 255 for number in leading) or last >= 256 ** (5 - len(parts)):
        raise ValueError(f"{name!r} ends in a number but is not an IPv4 address")
    value = last
    for index, number in enumerate(leading):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _number(part: str) -> int | None:
    digits, base = part, 10
    if part[:2] in ("0x", "0X"):
        digits, base = part[2:], 16
    elif len(part) > 1 and part.startswith("0"):
        digits, base = part[1:], 8
    if digits == "":
        return 0 if base == 16 else None
    allowed = "0123456789abcdefABCDEF"[: base if base < 16 else 22]
    if not all(char in allowed for char in digits):
        return None
    return int(digits, base)


def _forms(address: Address) -> list[Address]:
    """The address and the IPv4 address it embeds (IPv4-mapped, NAT64, IPv4-compatible,
    6to4), if any: each may reach that IPv4 host."""
    forms: list[Address] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            forms.append(address.ipv4_mapped)
        elif address in _NAT64 or (address in _COMPATIBLE and int(address) > 1):
            forms.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        elif address.sixtofour is not None:
            forms.append(address.sixtofour)
    return forms


def _denied_as(forms: list[Address]) -> list[Address]:
    """The forms a deny list judges: an address of "this host" (0.0.0.0/8, ::) or of
    loopback (127.0.0.0/8, ::1) stands for both 127.0.0.1 and ::1 too, which is where a
    connection to it goes. Not for an allow list: allowing 127.0.0.1 allows no other."""
    if any(form.is_unspecified or form.is_loopback or form in _THIS_HOST for form in forms):
        return [*forms, *_LOOPBACKS]
    return forms


class OutboundGuard:
    """Decides whether a host may be called, given the allow and deny lists.

    The deny list always wins. A default-denied address (link-local, metadata) is
    allowed only when an allow-list *network* covers it: an allowed host name does not
    lift it, since whoever controls that name's DNS could point it anywhere.
    """

    def __init__(
        self,
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        *,
        resolver: Resolver | None = None,
        cache_seconds: float = 0.0,
    ) -> None:
        self._allow = _Rules.parse(allow)
        self._deny = _Rules.parse(deny)
        self._resolver = resolver or system_resolver
        self._cache_seconds = cache_seconds
        # Normalized name -> (fresh until, per time.monotonic(); its addresses).
        self._answers: dict[str, tuple[float, tuple[Address, ...]]] = {}
        # Lookups in flight, shared by every caller asking for the same name meanwhile.
        self._lookups: dict[str, asyncio.Future[tuple[Address, ...]]] = {}

    def check_address(self, host: str, address: Address) -> None:
        """Raise OutboundDenied unless `host` may be reached at `address`."""
        name = normalize_host(host)
        forms = _forms(address)
        shown = name if name == str(address) else f"{name} ({address})"
        if name in self._deny.names or self._deny.covers(_denied_as(forms)):
            raise OutboundDenied(shown, "on the deny list")
        allowed_network = self._allow.covers(forms)
        if not allowed_network and any(f in n for f in forms for n in DEFAULT_DENY):
            raise OutboundDenied(shown, "link-local and cloud metadata addresses are denied")
        if self._allow and not (allowed_network or name in self._allow.names):
            raise OutboundDenied(shown, "not on the allow list")

    def check_static(self, host: str) -> None:
        """What can be decided without DNS: a literal address, or a denied host name."""
        literal = self._literal(host)
        if literal is not None:
            self.check_address(host, literal)
        elif normalize_host(host) in self._deny.names:
            raise OutboundDenied(normalize_host(host), "on the deny list")

    def _literal(self, host: str) -> Address | None:
        try:
            return parse_literal(host)
        except ValueError:
            # Never handed to a resolver, which might read it some other way.
            raise OutboundDenied(
                normalize_host(host), "ends in a number but is not an IPv4 address"
            ) from None

    async def resolve(self, host: str, port: int) -> list[Address]:
        """Every address `host` resolves to, each checked; raises OutboundDenied when any
        of them is denied, ResolutionFailed when the name does not resolve."""
        literal = self._literal(host)
        if literal is not None:
            self.check_address(host, literal)
            return [literal]
        self.check_static(host)
        addresses = await self._lookup(host, port)
        for address in addresses:
            self.check_address(host, address)
        return list(addresses)

    async def _lookup(self, host: str, port: int) -> tuple[Address, ...]:
        if self._cache_seconds <= 0:
            return await self._query(host, port)
        name = normalize_host(host)
        cached = self._answers.get(name)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        lookup = self._lookups.get(name)
        if lookup is None:
            lookup = self._lookups[name] = asyncio.ensure_future(self._query(host, port))
            lookup.add_done_callback(functools.partial(self._lookup_done, name))
        # Shielded: a caller that gives up (its timeout) leaves the lookup to the others.
        return await asyncio.shield(lookup)

    async def _query(self, host: str, port: int) -> tuple[Address, ...]:
        """Ask the resolver; a failure is raised, never kept."""
        try:
            answers = await self._resolver(normalize_host(host), port)
        except (OSError, UnicodeError) as exc:
            raise ResolutionFailed(host, _describe(exc)) from exc
        try:
            addresses = tuple(dict.fromkeys(_parse_answers(answers)))
        except ValueError as exc:
            raise ResolutionFailed(host, str(exc)) from exc
        if not addresses:
            raise ResolutionFailed(host, "no addresses")
        if self._cache_seconds > 0:
            now = time.monotonic()
            if len(self._answers) >= _MAX_CACHED_NAMES:
                self._answers = {k: v for k, v in self._answers.items() if v[0] > now}
            self._answers[normalize_host(host)] = (now + self._cache_seconds, addresses)
        return addresses

    def _lookup_done(self, name: str, lookup: asyncio.Future[tuple[Address, ...]]) -> None:
        if self._lookups.get(name) is lookup:
            del self._lookups[name]
        if not lookup.cancelled():
            lookup.exception()  # retrieved: every caller may have given up


def _parse_answers(answers: Iterable[str]) -> Iterator[Address]:
    for answer in answers:
        yield ipaddress.ip_address(answer)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, socket.gaierror) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
