"""The address judge: IANA tables, embedded IPv4 forms, and where `ipaddress` flags are wrong."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpkit.egress.addresses import IPV4_DENY, IPV6_DENY_IN_GLOBAL, judge_address

GLOBAL = IPv6Network("2000::/3")


def _in(network: IPv4Network | IPv6Network) -> st.SearchStrategy[int]:
    return st.integers(int(network.network_address), int(network.broadcast_address))


# The measured flag bugs: each of these is special, whatever `ipaddress` says.
@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("100.64.0.1", "cgnat"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("fec0::1", "site_local"),
        ("192.88.99.1", "reserved"),
        ("64:ff9b::a9fe:a9fe", "link_local"),
        ("::a9fe:a9fe", "embedded_ipv4"),
        ("2002::1", "embedded_ipv4"),
        ("::ffff:0:0", "unspecified"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::", "unspecified"),
        ("::1", "loopback"),
    ],
)
def test_flag_traps_are_refused(address: str, reason: str) -> None:
    denial = judge_address(ip_address(address))
    assert denial is not None
    assert denial.reason == reason


def test_zone_index_refused() -> None:
    assert judge_address(IPv6Address("2606:4700::1%eth0")) is not None


@given(st.sampled_from(IPV4_DENY).flatmap(lambda row: st.tuples(st.just(row), _in(row[0]))))
def test_every_ipv4_table_row_refused(case: tuple[tuple[IPv4Network, str, str], int]) -> None:
    (_network, reason, _), value = case
    ip = IPv4Address(value)
    denial = judge_address(ip)
    assert denial is not None
    assert denial.reason == ("broadcast" if ip == IPv4Address("255.255.255.255") else reason)


@given(st.integers(0, 2**32 - 1))
def test_ipv4_judged_by_the_table_alone(value: int) -> None:
    ip = IPv4Address(value)
    special = any(ip in network for network, _, _ in IPV4_DENY)
    assert (judge_address(ip) is None) == (not special)


@given(st.sampled_from(IPV4_DENY).flatmap(lambda row: _in(row[0])))
def test_embedded_forms_of_special_ipv4_refused(value: int) -> None:
    v4 = IPv4Address(value)
    packed = v4.packed
    forms = [
        IPv6Address(b"\0" * 10 + b"\xff\xff" + packed),  # mapped
        IPv6Address(bytes.fromhex("0064ff9b") + b"\0" * 8 + packed),  # NAT64
        IPv6Address(b"\0" * 12 + packed),  # compatible
        IPv6Address(b"\x20\x02" + packed + b"\0" * 10),  # 6to4
        IPv6Address(bytes.fromhex("20010000") + b"\0" * 8 + bytes(b ^ 0xFF for b in packed)),  # Teredo
    ]
    for form in forms:
        assert judge_address(form) is not None, form


@given(st.integers(0, 2**128 - 1))
def test_ipv6_outside_global_unicast_refused(value: int) -> None:
    ip = IPv6Address(value)
    in_mapped_or_nat64 = ip in IPv6Network("::ffff:0:0/96") or ip in IPv6Network("64:ff9b::/96")
    if ip not in GLOBAL and not in_mapped_or_nat64:
        assert judge_address(ip) is not None


@given(_in(GLOBAL))
def test_ipv6_global_unicast_allowed_unless_special(value: int) -> None:
    ip = IPv6Address(value)
    special = any(ip in network for network, _, _ in IPV6_DENY_IN_GLOBAL)
    assert (judge_address(ip) is None) == (not special)


@pytest.mark.parametrize(
    "address", ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]
)
def test_public_addresses_allowed(address: str) -> None:
    assert judge_address(ip_address(address)) is None
