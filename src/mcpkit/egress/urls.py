"""Canonicalise a URL the way the HTTP client, the resolver and a WHATWG parser would all read it.

Every spelling that some reader turns into an address is normalised *before* the check: IDNA and
UTS #46 mapping (fullwidth digits, ideographic dots, circled letters), lower case, one trailing
dot, and the IPv4 forms `inet_aton` and WHATWG accept (decimal `2130706433`, octal `0177.0.0.1`,
hex `0x7f.1`, short `127.1`). Whatever two readers could disagree on is refused instead: userinfo
(`a@b`), backslashes before the query, zone indexes, ports not written as 1-5 ASCII digits, and a
host the final `httpx2.URL` reads differently from us.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address

import httpx2
import idna

from mcpkit.egress.addresses import IPAddress
from mcpkit.egress.errors import EgressDenied

__all__ = ["DEFAULT_PORTS", "Target", "canonical_host", "canonicalise", "parse_ipv4_loose"]

DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_URL_CHARS = 8192

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*")
_PORT = re.compile(r"[0-9]{1,5}")


@dataclass(frozen=True)
class Target:
    """A URL in the one form the client will send.

    Attributes:
        url: The canonical URL (no userinfo, no fragment, host canonical, default port dropped).
        scheme: `http` or `https`.
        host: ASCII host: punycode name without trailing dot, dotted IPv4, or IPv6 without brackets.
        ip: The address when the host is an IP literal (in any spelling), else None.
        port: The effective port (default filled in).
    """

    url: httpx2.URL
    scheme: str
    host: str
    ip: IPAddress | None
    port: int

    @property
    def origin(self) -> tuple[str, str, int]:
        """(scheme, host, port): what decides where credentials may go."""
        return (self.scheme, self.host, self.port)


def _deny(reason: str, message: str, detail: str = "") -> EgressDenied:
    return EgressDenied(reason, message, detail)


def parse_ipv4_loose(host: str) -> IPv4Address | None:
    """Read `host` as IPv4 the way `inet_aton` and the WHATWG URL parser do, else None.

    >>> str(parse_ipv4_loose("0x7f.1"))
    '127.0.0.1'
    >>> str(parse_ipv4_loose("2130706433"))
    '127.0.0.1'
    >>> parse_ipv4_loose("1.2.3.4.5") is None
    True
    """
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers: list[int] = []
    for part in parts:
        if not _NUMERIC_LABEL.fullmatch(part):
            return None
        if part[:2] in ("0x", "0X"):
            digits, base = part[2:] or "0", 16
        elif len(part) > 1 and part.startswith("0"):
            digits, base = part[1:], 8
        else:
            digits, base = part, 10
        try:
            numbers.append(int(digits, base))
        except ValueError:
            return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        return None
    value = last
    for i, n in enumerate(head):
        value += n << (8 * (3 - i))
    return IPv4Address(value)


def canonical_host(text: str, *, bracketed: bool = False) -> tuple[str, IPAddress | None]:
    """The canonical ASCII form of a URL host and, for any IP spelling, the address.

    Args:
        text: The host as written in the URL (without brackets).
        bracketed: Whether it was written in `[...]` (an IPv6 literal).

    Returns:
        (host, ip): `ip` is None for a DNS name.

    Raises:
        EgressDenied: `host` or `numeric_host` when the host cannot be read one way only.
    """
    if bracketed:
        if "%" in text:
            raise _deny("host", "IPv6 zone indexes are not allowed in URLs.", f"zone index in [{text}]")
        try:
            ip6 = IPv6Address(text)
        except ValueError:
            raise _deny(
                "host", "The URL's IPv6 literal is not valid.", f"bad IPv6 literal [{text}]"
            ) from None
        return ip6.compressed, ip6
    host = text
    if not host.isascii():
        try:
            host = idna.uts46_remap(host, std3_rules=True, transitional=False)
        except idna.IDNAError:
            raise _deny(
                "host", "The URL's host name is not a valid domain name.", f"UTS46: {text!r}"
            ) from None
    host = host.lower()
    if host.endswith("."):
        host = host[:-1]
    labels = host.split(".")
    if not host or any(not label for label in labels):
        raise _deny("host", "The URL has an empty or malformed host.", f"host {text!r}")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        ip4 = parse_ipv4_loose(host)
        if ip4 is None:
            raise _deny(
                "numeric_host", "The URL's host looks numeric but is not an IPv4 address.", f"{text!r}"
            )
        return str(ip4), ip4
    if not host.isascii():
        try:
            host = idna.encode(host, uts46=False).decode("ascii")
        except idna.IDNAError:
            raise _deny(
                "host", "The URL's host name is not a valid domain name.", f"IDNA: {text!r}"
            ) from None
        labels = host.split(".")
    for label in labels:
        if not _LABEL.fullmatch(label):
            raise _deny("host", "The URL's host name is not a valid domain name.", f"label {label!r}")
        if label.startswith("xn--"):
            try:
                idna.decode(label)
            except (idna.IDNAError, UnicodeError):
                raise _deny(
                    "host", "The URL's host name is not a valid domain name.", f"bad punycode {label!r}"
                ) from None
    if len(host) > 253:
        raise _deny("host", "The URL's host name is too long.", f"{len(host)} characters")
    return host, None


def _split_authority(authority: str) -> tuple[str, bool, str | None]:
    """(host text, bracketed, port text or None) of an authority without userinfo."""
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise _deny("malformed", "The URL's IPv6 literal is not closed.", authority)
        after = authority[end + 1 :]
        if after and not after.startswith(":"):
            raise _deny("malformed", "The URL's authority is malformed.", authority)
        return authority[1:end], True, after[1:] if after else None
    host, sep, port = authority.partition(":")
    return host, False, port if sep else None


def canonicalise(url: str) -> Target:
    """Canonicalise an absolute http(s) URL, refusing anything that parsers could read two ways.

    >>> canonicalise("HTTP://Bücher.DE.:80/a#frag").url
    URL('http://xn--bcher-kva.de/a')
    >>> canonicalise("http://0x7f.1/").host
    '127.0.0.1'

    Args:
        url: The URL as given.

    Returns:
        The `Target` the client will send to.

    Raises:
        EgressDenied: with reason `malformed`, `scheme`, `userinfo`, `backslash`, `host`,
            `numeric_host` or `port`.
    """
    if not isinstance(url, str) or len(url) > MAX_URL_CHARS:
        raise _deny("malformed", "The URL is not a string of reasonable length.")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url) or url != url.strip():
        raise _deny("malformed", "The URL contains control characters or surrounding whitespace.")
    match = _SCHEME.match(url)
    if match is None:
        raise _deny("scheme", "Only absolute http:// and https:// URLs are allowed.")
    scheme = match.group(1).lower()
    if scheme not in DEFAULT_PORTS:
        raise _deny("scheme", "Only http:// and https:// URLs are allowed.", f"scheme {scheme!r}")
    rest = url[match.end() :]
    rest_no_fragment = rest.split("#", 1)[0]
    if "\\" in rest_no_fragment.split("?", 1)[0]:
        raise _deny("backslash", "Backslashes are not allowed in a URL's authority or path.")
    if not rest.startswith("//"):
        raise _deny("malformed", "The URL must have the form scheme://host/path.")
    after = rest_no_fragment[2:]
    cut = min([i for i in (after.find("/"), after.find("?")) if i >= 0], default=len(after))
    authority, path_query = after[:cut], after[cut:]
    if "@" in authority:
        raise _deny("userinfo", "URLs with user information (user@host) are not allowed.")
    host_text, bracketed, port_text = _split_authority(authority)
    host, ip = canonical_host(host_text, bracketed=bracketed)
    default = DEFAULT_PORTS[scheme]
    if port_text is None or port_text == "":
        port = default
    elif _PORT.fullmatch(port_text) and 1 <= int(port_text) <= 65535:
        port = int(port_text)
    else:
        raise _deny("port", "The URL's port must be a number from 1 to 65535.", f"port {port_text!r}")
    netloc = f"[{host}]" if isinstance(ip, IPv6Address) else host
    if port != default:
        netloc += f":{port}"
    if path_query and not path_query.startswith("/"):
        path_query = "/" + path_query
    text = f"{scheme}://{netloc}{path_query or '/'}"
    try:
        parsed = httpx2.URL(text)
    except httpx2.InvalidURL:
        raise _deny("malformed", "The URL could not be parsed.", text) from None
    if parsed.raw_host.decode("ascii") != host or (parsed.port or default) != port or parsed.userinfo:
        raise _deny("malformed", "The URL is ambiguous.", f"httpx reads {parsed!r}, we read {host}:{port}")
    return Target(url=parsed, scheme=scheme, host=host, ip=ip, port=port)
