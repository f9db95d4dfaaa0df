"""Judge IP addresses by explicit tables from the IANA special-purpose registries.

The `ipaddress` flags are not used: measured on 3.11-3.13, 100.64/10 passes the usual flag
combination, `224.0.0.1`, `ff02::1`, `fec0::1`, `192.88.99.1` and `64:ff9b::a9fe:a9fe` report
`is_global`, and 2002::/16 counts as global before 3.13. The tables below are the whole truth.

IPv4: everything outside `IPV4_DENY` is allowed.
IPv6: only 2000::/3 is allowed, minus `IPV6_DENY_IN_GLOBAL`; outside 2000::/3 a row of
`IPV6_DENY_OUTSIDE_GLOBAL` names the reason, or the address is "reserved". IPv6 forms that embed
an IPv4 address are handled before the tables: IPv4-mapped (::ffff:0:0/96) and NAT64
(64:ff9b::/96) are judged by the embedded address (the kernel or the NAT64 gateway delivers to
it); IPv4-compatible (::/96), 6to4 (2002::/16) and Teredo (2001::/32) are refused outright, the
reason naming what they embed.

Cloud providers' special addresses (`mcpkit.egress.cloud`) are judged after the IANA tables:
one outside them (Azure's WireServer) is refused as `cloud_platform`, and a denial of one inside
them names the service in its detail.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address
from typing import Literal

from mcpkit.egress.cloud import cloud_service

__all__ = [
    "IPV4_DENY",
    "IPV6_DENY_IN_GLOBAL",
    "IPV6_DENY_OUTSIDE_GLOBAL",
    "AddressJudge",
    "Denial",
    "IPAddress",
    "Reason",
    "judge_address",
    "parse_ip",
]

IPAddress = IPv4Address | IPv6Address

Reason = Literal[
    "unspecified",
    "loopback",
    "private",
    "link_local",
    "cgnat",
    "multicast",
    "broadcast",
    "documentation",
    "benchmarking",
    "reserved",
    "embedded_ipv4",
    "site_local",
    "unique_local",
    "cloud_platform",
]


@dataclass(frozen=True)
class Denial:
    """Why an address is refused: a stable reason code and an operator-facing detail."""

    reason: Reason
    detail: str


AddressJudge = Callable[[IPAddress], Denial | None]
"""Returns None when an address may be dialled, else the `Denial`."""

_Row = tuple[str, Reason, str]

# IANA IPv4 Special-Purpose Address Registry (plus multicast and class E from the address space
# registry). Everything listed is refused, including the few rows IANA marks "globally reachable"
# (192.0.0.9/32, 192.31.196/24, 192.175.48/24): no tool needs them.
_IPV4_ROWS: tuple[_Row, ...] = (
    ("0.0.0.0/8", "unspecified", "this network (RFC 791)"),
    ("10.0.0.0/8", "private", "private-use (RFC 1918)"),
    ("100.64.0.0/10", "cgnat", "shared address space (RFC 6598)"),
    ("127.0.0.0/8", "loopback", "loopback (RFC 1122)"),
    ("169.254.0.0/16", "link_local", "link local (RFC 3927)"),
    ("172.16.0.0/12", "private", "private-use (RFC 1918)"),
    ("192.0.0.0/24", "reserved", "IETF protocol assignments (RFC 6890)"),
    ("192.0.2.0/24", "documentation", "TEST-NET-1 (RFC 5737)"),
    ("192.31.196.0/24", "reserved", "AS112-v4 (RFC 7535)"),
    ("192.52.193.0/24", "reserved", "AMT (RFC 7450)"),
    ("192.88.99.0/24", "reserved", "deprecated 6to4 relay anycast (RFC 7526)"),
    ("192.168.0.0/16", "private", "private-use (RFC 1918)"),
    ("192.175.48.0/24", "reserved", "direct delegation AS112 service (RFC 7534)"),
    ("198.18.0.0/15", "benchmarking", "benchmarking (RFC 2544)"),
    ("198.51.100.0/24", "documentation", "TEST-NET-2 (RFC 5737)"),
    ("203.0.113.0/24", "documentation", "TEST-NET-3 (RFC 5737)"),
    ("224.0.0.0/4", "multicast", "multicast (RFC 5771)"),
    ("255.255.255.255/32", "broadcast", "limited broadcast (RFC 919)"),
    ("240.0.0.0/4", "reserved", "reserved for future use (RFC 1112)"),
)

# Inside 2000::/3 (global unicast), the blocks that are not ordinary global unicast.
_IPV6_GLOBAL_ROWS: tuple[_Row, ...] = (
    ("2001::/32", "embedded_ipv4", "Teredo (RFC 4380)"),
    ("2001::/23", "reserved", "IETF protocol assignments (RFC 2928)"),
    ("2001:db8::/32", "documentation", "documentation (RFC 3849)"),
    ("2002::/16", "embedded_ipv4", "6to4 (RFC 3056)"),
    ("2620:4f:8000::/48", "reserved", "direct delegation AS112 service (RFC 7534)"),
    ("3fff::/20", "documentation", "documentation (RFC 9637)"),
    ("3ffe::/16", "reserved", "former 6bone (RFC 3701)"),
)

# Outside 2000::/3 everything is refused; these rows only give the precise reason.
_IPV6_OTHER_ROWS: tuple[_Row, ...] = (
    ("::/128", "unspecified", "unspecified address (RFC 4291)"),
    ("::1/128", "loopback", "loopback (RFC 4291)"),
    ("::/96", "embedded_ipv4", "IPv4-compatible (deprecated, RFC 4291)"),
    ("64:ff9b:1::/48", "reserved", "local-use IPv4/IPv6 translation (RFC 8215)"),
    ("100::/64", "reserved", "discard-only (RFC 6666)"),
    ("5f00::/16", "reserved", "SRv6 SIDs (RFC 9602)"),
    ("fc00::/7", "unique_local", "unique local (RFC 4193)"),
    ("fe80::/10", "link_local", "link local (RFC 4291)"),
    ("fec0::/10", "site_local", "site local (deprecated, RFC 3879)"),
    ("ff00::/8", "multicast", "multicast (RFC 4291)"),
)

IPV4_DENY: tuple[tuple[IPv4Network, Reason, str], ...] = tuple(
    (IPv4Network(net), reason, name) for net, reason, name in _IPV4_ROWS
)
IPV6_DENY_IN_GLOBAL: tuple[tuple[IPv6Network, Reason, str], ...] = tuple(
    (IPv6Network(net), reason, name) for net, reason, name in _IPV6_GLOBAL_ROWS
)
IPV6_DENY_OUTSIDE_GLOBAL: tuple[tuple[IPv6Network, Reason, str], ...] = tuple(
    (IPv6Network(net), reason, name) for net, reason, name in _IPV6_OTHER_ROWS
)

_GLOBAL_UNICAST = IPv6Network("2000::/3")
_MAPPED = IPv6Network("::ffff:0:0/96")
_NAT64 = IPv6Network("64:ff9b::/96")
_COMPATIBLE = IPv6Network("::/96")
_SIXTOFOUR = IPv6Network("2002::/16")
_TEREDO = IPv6Network("2001::/32")


def _with_cloud(ip: IPAddress, denial: Denial | None) -> Denial | None:
    """`denial`, naming the cloud service `ip` is (or refusing it as one when the tables did not)."""
    row = cloud_service(ip)
    if row is None:
        return denial
    what = f"{row.provider} {row.service}"
    if denial is None:
        return Denial("cloud_platform", f"{ip} is {what}")
    return Denial(denial.reason, f"{denial.detail}; {what}")


def _judge_v4(ip: IPv4Address) -> Denial | None:
    for net, reason, name in IPV4_DENY:
        if ip in net:
            return _with_cloud(ip, Denial(reason, f"{ip} is {name}"))
    return _with_cloud(ip, None)


def _embedded(ip: IPv6Address) -> tuple[str, IPv4Address] | None:
    """The IPv4 address an IPv6 form embeds, with the form's name, if it embeds one."""
    packed = ip.packed
    if ip in _MAPPED:
        return "IPv4-mapped", IPv4Address(packed[12:])
    if ip in _NAT64:
        return "NAT64", IPv4Address(packed[12:])
    if ip in _COMPATIBLE and int(ip) > 1:
        return "IPv4-compatible", IPv4Address(packed[12:])
    if ip in _SIXTOFOUR:
        return "6to4", IPv4Address(packed[2:6])
    if ip in _TEREDO:  # the client address is stored inverted in the last 32 bits
        return "Teredo", IPv4Address(bytes(b ^ 0xFF for b in packed[12:]))
    return None


def _judge_v6(ip: IPv6Address) -> Denial | None:
    embedded = _embedded(ip)
    if embedded is not None:
        form, inner = embedded
        inner_denial = _judge_v4(inner)
        if form in ("IPv4-mapped", "NAT64"):
            if inner_denial is None:
                return None
            return Denial(inner_denial.reason, f"{ip} is {form}: {inner_denial.detail}")
        what = inner_denial.reason if inner_denial is not None else "public"
        return Denial("embedded_ipv4", f"{ip} is {form}, embedding {inner} ({what}); refused")
    if ip in _GLOBAL_UNICAST:
        for net, reason, name in IPV6_DENY_IN_GLOBAL:
            if ip in net:
                return _with_cloud(ip, Denial(reason, f"{ip} is {name}"))
        return _with_cloud(ip, None)
    for net, reason, name in IPV6_DENY_OUTSIDE_GLOBAL:
        if ip in net:
            return _with_cloud(ip, Denial(reason, f"{ip} is {name}"))
    return _with_cloud(ip, Denial("reserved", f"{ip} is outside IPv6 global unicast (2000::/3)"))


def judge_address(ip: IPAddress) -> Denial | None:
    """The production address judge: None when `ip` may be dialled, else why not.

    >>> judge_address(IPv4Address("100.64.0.1")).reason
    'cgnat'
    >>> judge_address(IPv6Address("::ffff:127.0.0.1")).reason
    'loopback'
    >>> judge_address(IPv4Address("93.184.215.14")) is None
    True

    Args:
        ip: The address about to be dialled.

    Returns:
        None if allowed, else a `Denial` with a reason code and an operator-facing detail.
    """
    if isinstance(ip, IPv4Address):
        return _judge_v4(ip)
    if ip.scope_id:
        return Denial("link_local", f"{ip} carries a zone index")
    return _judge_v6(ip)


def parse_ip(text: str) -> IPAddress | None:
    """`text` as a strictly written IP address (dotted quad or IPv6), else None.

    Odd IPv4 spellings are not accepted here; `mcpkit.egress.urls` normalises them first.
    """
    try:
        return ip_address(text)
    except ValueError:
        return None
