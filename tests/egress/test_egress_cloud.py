"""Cloud providers' special addresses are refused in every spelling a URL or a resolver can give them.

Each row of `mcpkit.egress.cloud.CLOUD_ADDRESSES` is tried as a URL literal in every IPv4 and
IPv6 spelling the guard parses (dotted, decimal, octal, hex, short forms, IPv4-mapped, NAT64,
6to4, IPv4-compatible, Teredo, expanded and upper-case IPv6) with the system resolver (glibc
reads numeric hosts itself, without DNS), and as the answer a name resolves to.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, IPv6Network

import pytest

from mcpkit.egress import EgressPolicy, StaticResolver, SystemResolver, check_url, judge_address
from mcpkit.egress.cloud import CLOUD_ADDRESSES, cloud_service
from mcpkit.errors import DefinitionError

pytestmark = pytest.mark.anyio

WIRESERVER = IPv4Address("168.63.129.16")


def _v4_spellings(ip: IPv4Address) -> list[str]:
    a, b, c, d = ip.packed
    value = int(ip)
    packed_hex = f"{value >> 16:x}:{value & 0xFFFF:x}"
    teredo = IPv6Address(int(IPv6Address("2001:0:4136:e378:8000:63bf::")) | (value ^ 0xFFFFFFFF))
    return [
        str(ip),
        str(value),  # decimal (inet_aton, WHATWG)
        f"0{a:o}.0{b:o}.0{c:o}.0{d:o}",  # octal
        f"0x{a:x}.0x{b:x}.0x{c:x}.0x{d:x}",  # hex per part
        f"0x{value:08x}",  # one hex number
        f"{a}.{b}.{(c << 8) | d}",  # a.b.c
        f"{a}.{(b << 16) | (c << 8) | d}",  # a.b
        f"0{a:o}.{b}.0x{c:x}.{d}",  # mixed
        f"[::ffff:{ip}]",  # IPv4-mapped
        f"[::ffff:{packed_hex}]",
        f"[0:0:0:0:0:ffff:{ip}]",
        f"[::FFFF:{packed_hex.upper()}]",
        f"[64:ff9b::{ip}]",  # NAT64 well-known prefix
        f"[64:ff9b::{packed_hex}]",
        f"[2002:{packed_hex}::1]",  # 6to4
        f"[::{ip}]",  # IPv4-compatible (deprecated)
        f"[{teredo}]",  # Teredo: the client address inverted
    ]


def _v6_spellings(ip: IPv6Address) -> list[str]:
    return [
        f"[{ip}]",
        f"[{ip.exploded}]",
        f"[{str(ip).upper()}]",
        f"[{ip}%25eth0]",  # a zone index: refused too
    ]


def _addresses() -> list[IPv4Address | IPv6Address]:
    """One address per row (a few inside a documented block)."""
    out: list[IPv4Address | IPv6Address] = []
    for row in CLOUD_ADDRESSES:
        if isinstance(row.network, IPv6Network) and row.network.prefixlen < 128:
            out += [row.network.network_address + n for n in (0x254, 0x253, 0x123, 0x23)]
        else:
            out.append(row.network.network_address)
    return out


CASES = [
    (str(ip), spelling)
    for ip in _addresses()
    for spelling in (_v4_spellings(ip) if isinstance(ip, IPv4Address) else _v6_spellings(ip))
]


def test_the_table_has_the_addresses_the_issue_names() -> None:
    for text in ("168.63.129.16", "169.254.169.254", "fd00:ec2::254", "fd20:ce::254", "100.100.100.200"):
        address = IPv4Address(text) if "." in text else IPv6Address(text)
        assert cloud_service(address) is not None, text
    assert all(row.source for row in CLOUD_ADDRESSES)
    # the table is reviewed by hand: a row must be an exact address or a block a provider documents
    assert all(
        row.network.prefixlen in (32, 128) or str(row.network) == "fd00:ec2::/32" for row in CLOUD_ADDRESSES
    )


@pytest.mark.parametrize(("address", "spelling"), CASES, ids=[f"{a}={s}" for a, s in CASES])
async def test_every_spelling_of_a_url_literal_is_refused(address: str, spelling: str) -> None:
    verdict = await check_url(f"http://{spelling}/latest/meta-data/", EgressPolicy(), SystemResolver())
    assert not verdict.allowed, (spelling, verdict.detail)
    assert verdict.addresses == ()


@pytest.mark.parametrize("address", [str(a) for a in _addresses()])
async def test_a_name_resolving_to_it_is_refused(address: str) -> None:
    answers = [address]
    if "." in address:
        answers.append(f"::ffff:{address}")
    for answer in answers:
        resolver = StaticResolver({"innocent.example.com": [answer, "93.184.215.14"]})
        verdict = await check_url("https://innocent.example.com/", EgressPolicy(), resolver)
        assert not verdict.allowed, answer
        assert "resolves to" in verdict.message
        assert address not in verdict.message  # the model never sees a resolved address


async def test_wireserver_is_refused_by_the_table_and_its_neighbours_are_not() -> None:
    denial = judge_address(WIRESERVER)
    assert denial is not None
    assert denial.reason == "cloud_platform"
    assert "Azure" in denial.detail
    mapped = judge_address(IPv6Address(f"::ffff:{WIRESERVER}"))
    assert mapped is not None
    assert mapped.reason == "cloud_platform"
    for neighbour in ("168.63.129.15", "168.63.129.17"):
        verdict = await check_url(f"https://{neighbour}/", EgressPolicy(), SystemResolver())
        assert verdict.allowed, verdict.detail


def test_a_denial_inside_an_iana_block_names_the_cloud_service() -> None:
    denial = judge_address(IPv4Address("169.254.169.254"))
    assert denial is not None
    assert denial.reason == "link_local"  # the IANA reason stays
    assert "instance metadata" in denial.detail
    v6 = judge_address(IPv6Address("fd20:ce::254"))
    assert v6 is not None
    assert "GCP" in v6.detail


@pytest.mark.parametrize(
    "network",
    [
        "fd00::/8",  # AWS fd00:ec2::/32, Oracle, Linode, Scaleway, Alibaba over IPv6
        "fd20::/16",  # GCP fd20:ce::254
        "fd00:c1::/32",  # Oracle fd00:c1::a9fe:a9fe
        "169.254.0.0/24",  # Tencent 169.254.0.23
        "169.254.42.0/24",  # Scaleway 169.254.42.42
        "169.254.170.0/24",  # AWS ECS, EKS Pod Identity
        "fd00:ec2::254/127",  # two addresses, one the AWS IMDS
    ],
)
def test_an_allowed_private_network_never_covers_a_cloud_address(network: str) -> None:
    with pytest.raises(DefinitionError) as info:
        EgressPolicy(allow=("api.internal",), private_networks=(network,))
    assert "name one such address alone" in str(info.value)


@pytest.mark.parametrize("network", ["fd20:ce::254/128", "169.254.0.23/32", "fd00:ec2::254/128", "fd12::/16"])
def test_one_cloud_address_named_alone_or_a_network_beside_them_is_accepted(network: str) -> None:
    assert EgressPolicy(allow=("api.internal",), private_networks=(network,)).networks


async def test_the_model_is_told_it_is_a_cloud_platform_address() -> None:
    verdict = await check_url(f"http://{WIRESERVER}/machine", EgressPolicy(), SystemResolver())
    assert verdict.reason == "cloud_platform"
    assert "cloud provider's platform address" in verdict.message
