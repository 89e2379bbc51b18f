"""The outbound guard: which addresses a target may be called at (API.md, "Outbound guard").

Every address a host resolves to is checked, and the transport then connects only to
those checked addresses, so a name cannot resolve to an allowed address for the check
and to a metadata address for the connection (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

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


def parse_literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(normalize_host(host))
    except ValueError:
        return None


def _forms(address: Address) -> list[Address]:
    """The address and the IPv4 address it embeds (IPv4-mapped, NAT64), if any."""
    forms: list[Address] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            forms.append(address.ipv4_mapped)
        elif address in _NAT64:
            forms.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
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
    ) -> None:
        self._allow = _Rules.parse(allow)
        self._deny = _Rules.parse(deny)
        self._resolver = resolver or system_resolver

    def check_address(self, host: str, address: Address) -> None:
        """Raise OutboundDenied unless `host` may be reached at `address`."""
        name = normalize_host(host)
        forms = _forms(address)
        shown = name if name == str(address) else f"{name} ({address})"
        if name in self._deny.names or self._deny.covers(forms):
            raise OutboundDenied(shown, "on the deny list")
        allowed_network = self._allow.covers(forms)
        if not allowed_network and any(f in n for f in forms for n in DEFAULT_DENY):
            raise OutboundDenied(shown, "link-local and cloud metadata addresses are denied")
        if self._allow and not (allowed_network or name in self._allow.names):
            raise OutboundDenied(shown, "not on the allow list")

    def check_static(self, host: str) -> None:
        """What can be decided without DNS: a literal address, or a denied host name."""
        literal = parse_literal(host)
        if literal is not None:
            self.check_address(host, literal)
        elif normalize_host(host) in self._deny.names:
            raise OutboundDenied(normalize_host(host), "on the deny list")

    async def resolve(self, host: str, port: int) -> list[Address]:
        """Every address `host` resolves to, each checked; raises OutboundDenied when any
        of them is denied, ResolutionFailed when the name does not resolve."""
        literal = parse_literal(host)
        if literal is not None:
            self.check_address(host, literal)
            return [literal]
        self.check_static(host)
        try:
            answers = await self._resolver(normalize_host(host), port)
        except (OSError, UnicodeError) as exc:
            raise ResolutionFailed(host, _describe(exc)) from exc
        try:
            addresses = list(dict.fromkeys(_parse_answers(answers)))
        except ValueError as exc:
            raise ResolutionFailed(host, str(exc)) from exc
        if not addresses:
            raise ResolutionFailed(host, "no addresses")
        for address in addresses:
            self.check_address(host, address)
        return addresses


def _parse_answers(answers: Iterable[str]) -> Iterator[Address]:
    for answer in answers:
        yield ipaddress.ip_address(answer)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, socket.gaierror) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
