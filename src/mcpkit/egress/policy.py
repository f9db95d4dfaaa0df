"""The egress policy: which hosts and ports, how big, how long, how many hops, and the address judge."""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Network, IPv6Address, IPv6Network, ip_network

from mcpkit.egress.addresses import (
    IPV4_DENY,
    IPV6_DENY_IN_GLOBAL,
    IPV6_DENY_OUTSIDE_GLOBAL,
    AddressJudge,
    Denial,
    IPAddress,
    judge_address,
)
from mcpkit.egress.cloud import CLOUD_ADDRESSES
from mcpkit.egress.errors import EgressDenied
from mcpkit.egress.urls import Target, canonical_host
from mcpkit.errors import DefinitionError

__all__ = ["METADATA_ADDRESSES", "AllowEntry", "EgressPolicy", "admit", "judge", "parse_private_network"]

IPNetwork = IPv4Network | IPv6Network

#: Cloud providers' special addresses (`mcpkit.egress.cloud`): a private network entry may cover one only
#: by naming one address alone.
METADATA_ADDRESSES: tuple[IPNetwork, ...] = tuple(row.network for row in CLOUD_ADDRESSES)


@dataclass(frozen=True)
class AllowEntry:
    """One egress allowlist entry: a host (name or IP) and optionally the one extra port it opens.

    A name matches itself and its subdomains (`example.com` matches `api.example.com`, never
    `badexample.com`); `.example.com` matches only the subdomains; an IP literal matches only itself.
    """

    host: str
    is_ip: bool
    port: int | None = None
    subdomains_only: bool = False

    @classmethod
    def parse(cls, entry: str) -> AllowEntry:
        """Parse `host`, `.suffix`, `host:port`, `[v6]` or `[v6]:port`; `DefinitionError` when invalid."""
        text = entry.strip() if isinstance(entry, str) else ""
        subdomains_only = text.startswith(".")
        text = text[1:] if subdomains_only else text
        port_text: str | None = None
        try:
            if text.startswith("["):
                inner, _, after = text[1:].partition("]")
                if after and not after.startswith(":"):
                    raise ValueError(entry)
                port_text = after[1:] or None
                host, ip = canonical_host(inner, bracketed=True)
            else:
                name, sep, port_part = text.partition(":")
                port_text = port_part if sep else None
                host, ip = canonical_host(name)
            port = None if port_text is None else int(port_text)
        except (EgressDenied, ValueError):
            raise DefinitionError(
                f"invalid egress allowlist entry {entry!r}: expected host, .suffix or host:port"
            ) from None
        if port is not None and not 1 <= port <= 65535:
            raise DefinitionError(f"invalid port in egress allowlist entry {entry!r}")
        if subdomains_only and (ip is not None or "." not in host):
            raise DefinitionError(
                f"invalid egress allowlist entry {entry!r}: a .suffix entry names a domain "
                "with at least two labels (.example.com), never an address or a top-level domain"
            )
        return cls(host=host, is_ip=ip is not None, port=port, subdomains_only=subdomains_only)

    def matches(self, host: str) -> bool:
        """Whether `host` (canonical) is this entry or, for names, one of its subdomains."""
        if host == self.host:
            return not self.subdomains_only
        return not self.is_ip and host.endswith("." + self.host)


@dataclass(frozen=True)
class EgressPolicy:
    """What the egress guard allows.

    Args:
        allow: Allowlist entries (`host` or `host:port`); None allows every public host, an empty
            list allows none. Present entries deny everything else.
        ports: Ports any allowed host may use (80 and 443 by default); an allowlist entry with a
            port opens that port for that entry's hosts only.
        max_bytes: Largest response body read, after decoding; reading stops past it.
        timeout: Seconds for the whole fetch: every hop, the token call and the body.
        max_redirects: Redirect hops followed before giving up.
        private_networks: Private networks the operator allows (`"10.1.0.0/16"`), for internal APIs
            whose allowlisted names resolve inside them. Needs an allowlist: private addresses are
            reached only through the names (or literals) listed there. Each entry must lie inside
            one special-purpose block (a private, unique-local, CGNAT, loopback or link-local
            range), so loopback and link-local open only when named themselves, and an entry may
            cover a cloud metadata address only by naming that address alone ("169.254.169.254/32").
        address_judge: Decides whether a resolved or literal address may be dialled. The default
            is the production judge, `judge_address`, built from the IANA tables. This is the one
            seam tests use to reach their own loopback servers: they pass a judge that admits
            127.0.0.1 and defers to `judge_address` for everything else. There is deliberately
            no boolean like `allow_loopback`: a flag is one config line away from production,
            while replacing the judge means writing code that says what it admits.
    """

    allow: tuple[str, ...] | None = None
    ports: frozenset[int] = frozenset({80, 443})
    max_bytes: int = 5 * 1024 * 1024
    timeout: float = 30.0
    max_redirects: int = 3
    address_judge: AddressJudge = judge_address
    private_networks: tuple[str, ...] = ()
    entries: tuple[AllowEntry, ...] = field(init=False, repr=False, compare=False)
    networks: tuple[IPNetwork, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        allow = self.allow
        if isinstance(allow, str):
            raise DefinitionError("egress allow must be a list of hosts, not one string")
        if allow is not None:
            object.__setattr__(self, "allow", tuple(allow))
        object.__setattr__(self, "ports", frozenset(self.ports))
        entries = tuple(AllowEntry.parse(e) for e in (allow or ()))
        object.__setattr__(self, "entries", entries)
        if self.max_bytes <= 0 or self.timeout <= 0 or self.max_redirects < 0:
            raise DefinitionError("egress max_bytes and timeout must be positive, max_redirects >= 0")
        if any(not 1 <= p <= 65535 for p in self.ports):
            raise DefinitionError("egress ports must be in 1..65535")
        if isinstance(self.private_networks, str):
            raise DefinitionError("egress private networks are a list (['10.1.0.0/16']), not one string")
        object.__setattr__(self, "private_networks", tuple(self.private_networks))
        object.__setattr__(self, "networks", tuple(parse_private_network(n) for n in self.private_networks))
        if self.networks and allow is None:
            raise DefinitionError(
                "egress private networks need an egress allowlist: name the internal hosts "
                "(egress=['orders.acme.internal']) that may resolve inside them"
            )

    def admits_private(self, ip: IPAddress) -> bool:
        """Whether `ip` lies in one of the operator's private networks (IPv4-mapped IPv6 by its IPv4)."""
        if isinstance(ip, IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip.version == net.version and ip in net for net in self.networks)


def parse_private_network(text: str) -> IPNetwork:
    """Parse one operator-allowed private network; raises `DefinitionError` when it is not one.

    >>> parse_private_network("10.1.0.0/16")
    IPv4Network('10.1.0.0/16')
    """
    try:
        net = ip_network(text.strip(), strict=True)
    except (ValueError, AttributeError):
        raise DefinitionError(
            f"invalid egress private network {text!r}: expected CIDR, e.g. 10.1.0.0/16"
        ) from None
    rows = IPV4_DENY if isinstance(net, IPv4Network) else IPV6_DENY_IN_GLOBAL + IPV6_DENY_OUTSIDE_GLOBAL
    if not any(net.version == row.version and net.subnet_of(row) for row, _, _ in rows):  # type: ignore[arg-type]
        raise DefinitionError(
            f"egress private network {text!r} is not inside one private or special-purpose block; "
            "name the internal network itself (e.g. 10.1.0.0/16)"
        )
    for row in CLOUD_ADDRESSES:
        if row.network.version == net.version and net.overlaps(row.network) and net.num_addresses > 1:
            alone = f"{row.network.network_address}/{net.max_prefixlen}"
            raise DefinitionError(
                f"egress private network {text!r} covers {row.provider}'s {row.service} "
                f"({row.network}); name one such address alone ({alone}) if a tool truly needs it"
            )
    return net


def admit(target: Target, policy: EgressPolicy) -> None:
    """Check everything about `target` that needs no DNS: allowlist, port and any literal address.

    Raises:
        EgressDenied: `not_allowlisted`, `port`, or the address judge's reason for an IP literal.
    """
    matching = [e for e in policy.entries if e.matches(target.host)]
    if policy.allow is not None and not matching:
        raise EgressDenied(
            "not_allowlisted",
            f"Egress to {target.host} is not allowed: the host is not on this server's egress allowlist.",
        )
    if target.port not in policy.ports and not any(e.port == target.port for e in matching):
        allowed = ", ".join(str(p) for p in sorted(policy.ports))
        raise EgressDenied(
            "port",
            f"Egress to port {target.port} is not allowed; allowed ports: {allowed}.",
        )
    if target.ip is not None:
        judge(target.ip, policy, target.host, literal=True)


_REASON_WORDS = {
    "unspecified": "an unspecified address",
    "loopback": "a loopback address",
    "private": "a private address",
    "unique_local": "a private (unique local) address",
    "site_local": "a private (site local) address",
    "link_local": "a link-local address",
    "cgnat": "a carrier-grade NAT address",
    "multicast": "a multicast address",
    "broadcast": "a broadcast address",
    "documentation": "a documentation address",
    "benchmarking": "a benchmarking address",
    "reserved": "a reserved special-purpose address",
    "embedded_ipv4": "an IPv6 form embedding an IPv4 address",
    "cloud_platform": "a cloud provider's platform address (metadata, credentials or host agent)",
}


def judge(ip: IPAddress, policy: EgressPolicy, host: str, *, literal: bool) -> None:
    """Raise `EgressDenied` when the policy's judge refuses `ip`; the message never shows `ip`
    unless the URL itself spelled it (`literal`)."""
    denial: Denial | None = policy.address_judge(ip)
    if denial is None or (policy.networks and policy.admits_private(ip)):
        return
    words = _REASON_WORDS.get(denial.reason, "a special-purpose address")
    if literal:
        message = f"Egress to {host} is not allowed: it is {words}."
    else:
        message = f"Egress to {host} is not allowed: the name resolves to {words}."
    raise EgressDenied(denial.reason, message, detail=f"{host}: {denial.detail}")
