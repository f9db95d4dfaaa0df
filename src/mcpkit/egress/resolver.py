"""Name resolution for the guard: one protocol, the system resolver, and a static map (curl's --resolve)."""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping, Sequence
from ipaddress import ip_address
from typing import Protocol, runtime_checkable

import anyio

from mcpkit.egress.addresses import IPAddress
from mcpkit.egress.urls import canonical_host

__all__ = ["ResolutionFailed", "Resolver", "StaticResolver", "SystemResolver"]


class ResolutionFailed(Exception):
    """The name has no usable address (NXDOMAIN, no A/AAAA, resolver error)."""


@runtime_checkable
class Resolver(Protocol):
    """Resolves a canonical ASCII host name to its addresses; called once per connection."""

    async def resolve(self, host: str, port: int) -> Sequence[IPAddress]:
        """Every address `host` has now, in preference order; raise `ResolutionFailed` if none."""
        ...


def _unique(addresses: Iterable[IPAddress]) -> list[IPAddress]:
    seen: dict[IPAddress, None] = {}
    for a in addresses:
        seen.setdefault(a, None)
    return list(seen)


class SystemResolver:
    """The operating system's resolver via `anyio.getaddrinfo` (TCP answers, both families)."""

    async def resolve(self, host: str, port: int) -> Sequence[IPAddress]:
        """All A/AAAA answers for `host`, deduplicated, in the resolver's order."""
        try:
            infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise ResolutionFailed(f"{host}: {exc}") from None
        found: list[IPAddress] = []
        for family, _type, _proto, _name, sockaddr in infos:
            if family in (socket.AF_INET, socket.AF_INET6):
                # keep a scope id if present ("fe80::1%eth0"): the judge refuses it
                text = str(sockaddr[0])
                if family == socket.AF_INET6 and len(sockaddr) >= 4 and sockaddr[3]:
                    text = f"{text.split('%')[0]}%{sockaddr[3]}"
                found.append(ip_address(text))
        if not found:
            raise ResolutionFailed(f"{host}: no addresses")
        return _unique(found)


class StaticResolver:
    """Fixed answers for some hosts, like curl's `--resolve`; others go to `fallback` or fail.

    Args:
        answers: Host -> addresses (strings or address objects), in the order to return them.
            Host keys are canonicalised (lower case, punycode, no trailing dot).
        fallback: Resolver for hosts not in `answers`; None makes them unresolvable.
    """

    def __init__(
        self, answers: Mapping[str, Sequence[str | IPAddress]], fallback: Resolver | None = None
    ) -> None:
        self._answers: dict[str, list[IPAddress]] = {}
        for host, addresses in answers.items():
            key, _ = canonical_host(host)
            self._answers[key] = _unique(ip_address(a) if isinstance(a, str) else a for a in addresses)
        self._fallback = fallback
        self.calls: list[str] = []

    async def resolve(self, host: str, port: int) -> Sequence[IPAddress]:
        """The configured answers for `host`, else the fallback's."""
        self.calls.append(host)
        if host in self._answers:
            if not self._answers[host]:
                raise ResolutionFailed(f"{host}: no addresses")
            return list(self._answers[host])
        if self._fallback is None:
            raise ResolutionFailed(f"{host}: not in the static map")
        return await self._fallback.resolve(host, port)
