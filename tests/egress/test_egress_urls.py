"""Canonicalisation: every spelling of an address is read as that address before the check."""

from __future__ import annotations

from ipaddress import IPv4Address

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpkit.egress import EgressDenied, EgressPolicy, StaticResolver, check_url
from mcpkit.egress.addresses import IPV4_DENY
from mcpkit.egress.urls import canonicalise, parse_ipv4_loose

FULLWIDTH = str.maketrans("0123456789abcdefxX.", "０１２３４５６７８９ａｂｃｄｅｆｘＸ．")
DOTS = ["。", "．", "｡"]


def spellings(ip: IPv4Address, dot: str) -> list[str]:
    """Ways to write `ip` in a URL host that inet_aton, WHATWG or UTS #46 read as `ip`."""
    a, b, c, d = ip.packed
    n = int(ip)
    return [
        str(ip),
        str(n),
        hex(n),
        "0" + oct(n)[2:],
        f"0{a:o}.0{b:o}.0{c:o}.0{d:o}",
        f"{a:#x}.{b:#x}.{c:#x}.{d:#x}",
        f"{a}.{(b << 16) | (c << 8) | d}",
        f"{a}.{b}.{(c << 8) | d}",
        f"{a:#X}.{b}.{c}.{d}".replace("0X", "0x", 1),
        f"{ip}.",
        str(ip).translate(FULLWIDTH),
        str(ip).replace(".", dot),
        hex(n).translate(FULLWIDTH),
    ]


@given(
    st.sampled_from(IPV4_DENY).flatmap(lambda r: st.integers(int(r[0].network_address), int(r[0][-1]))),
    st.sampled_from(DOTS),
)
@pytest.mark.anyio
async def test_every_spelling_of_a_special_ipv4_is_refused(value: int, dot: str) -> None:
    ip = IPv4Address(value)
    expected = _reason(ip)
    resolver = StaticResolver({})  # nothing resolves: every refusal must come from reading the literal
    for host in spellings(ip, dot):
        target = canonicalise(f"http://{host}/")
        assert target.ip == ip, host
        verdict = await check_url(f"http://{host}/x", EgressPolicy(), resolver)
        assert not verdict.allowed, host
        assert verdict.reason == expected, (host, verdict)
        verdict6 = await check_url(f"http://[::ffff:{ip}]/", EgressPolicy(), resolver)
        assert not verdict6.allowed


def _reason(ip: IPv4Address) -> str:
    if ip == IPv4Address("255.255.255.255"):
        return "broadcast"
    return next(reason for network, reason, _ in IPV4_DENY if ip in network)


@given(st.integers(0, 2**32 - 1), st.sampled_from(DOTS))
def test_spellings_agree(value: int, dot: str) -> None:
    ip = IPv4Address(value)
    for host in spellings(ip, dot):
        assert canonicalise(f"https://{host}/").host == str(ip)


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("0x7f.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("0x", "0.0.0.0"),
        ("1.0x1", "1.0.0.1"),
    ],
)
def test_parse_ipv4_loose(host: str, expected: str) -> None:
    assert str(parse_ipv4_loose(host)) == expected


@pytest.mark.parametrize(
    "host", ["1.2.3.4.5", "256.0.0.1", "1.16777216", "08", "0x1g", "1..2", "", "+1", "1_0"]
)
def test_parse_ipv4_loose_rejects(host: str) -> None:
    assert parse_ipv4_loose(host) is None


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("HTTPS://Example.COM.:443/a/b?c=d#e", "https://example.com/a/b?c=d"),
        ("http://bücher.de", "http://xn--bcher-kva.de/"),
        ("http://ⓔxample.com/", "http://example.com/"),
        ("http://exa\u00admple.com/", "http://example.com/"),
        ("http://example.com:8080", "http://example.com:8080/"),
        ("http://example.com?x=1", "http://example.com/?x=1"),
        ("http://[2606:4700:0:0::1]:80/", "http://[2606:4700::1]/"),
        ("http://example.com:/p", "http://example.com/p"),
    ],
)
def test_canonical_form(url: str, canonical: str) -> None:
    target = canonicalise(url)
    assert str(target.url) == canonical
    # the HTTP client reads the canonical URL exactly as we do
    assert httpx2.URL(canonical).raw_host.decode() == target.host


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://a:b:c/", "port"),
        ("http://[::1/", "malformed"),
        ("http://[::1]x/", "malformed"),
        ("http://[127.0.0.1]/", "host"),
        ("http://a..b/", "host"),
        ("http://-a.com/", "host"),
        ("http://xn--zz.com/", "host"),
        ("http://a b.com/", "host"),
        ("http://" + "a" * 64 + ".com/", "host"),
        ("http://" + ".".join(["a" * 60] * 5) + "/", "host"),
        ("http://ex%41mple.com/", "host"),
        ("http://a\uff1ab.com/", "host"),
        ("http://x/" + "a" * 9000, "malformed"),
    ],
)
def test_unreadable_urls_refused(url: str, reason: str) -> None:
    with pytest.raises(EgressDenied) as caught:
        canonicalise(url)
    assert caught.value.reason == reason
