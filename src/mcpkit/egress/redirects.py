"""One redirect hop: where it goes, with which method, headers and body.

On a change of origin the request keeps only a short list of harmless headers. A keep-list,
not a deny-list: `Authorization`, `Cookie` and `Proxy-Authorization` are easy to name, but the
next upstream's `X-Acme-Key`, `Private-Token` or `api-key` is not, and a deny-list leaks it.
The body of a 307/308 is dropped too. An http -> https upgrade of the same host on default
ports is not a change of origin. https -> http is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx2

from mcpkit.egress.errors import EgressDenied
from mcpkit.egress.urls import Target, canonicalise

__all__ = ["KEEP_ACROSS_ORIGINS", "REDIRECT_STATUSES", "Hop", "next_hop", "same_origin"]

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

KEEP_ACROSS_ORIGINS = frozenset(
    {"accept", "accept-language", "accept-encoding", "user-agent", "cache-control", "pragma"}
)
_BODY_HEADERS = (
    "content-type",
    "content-length",
    "content-encoding",
    "content-language",
    "transfer-encoding",
)


@dataclass(frozen=True)
class Hop:
    """The next request of a redirect chain."""

    target: Target
    method: str
    headers: httpx2.Headers
    body: bytes | None
    origin_changed: bool


def same_origin(a: Target, b: Target) -> bool:
    """Same scheme, host and port, or an http:80 -> https:443 upgrade of the same host."""
    if a.origin == b.origin:
        return True
    return a.host == b.host and (a.scheme, a.port, b.scheme, b.port) == ("http", 80, "https", 443)


def next_hop(
    current: Target, status: int, method: str, headers: httpx2.Headers, body: bytes | None, location: str
) -> Hop:
    """Build the request a redirect asks for; the caller still applies the policy to `Hop.target`.

    Args:
        current: The URL that answered with the redirect.
        status: The redirect status (301, 302, 303, 307 or 308).
        method: Its method.
        headers: Its headers.
        body: Its body.
        location: The `Location` header value.

    Raises:
        EgressDenied: `https_downgrade`, or any canonicalisation refusal of the new URL.
    """
    if "\\" in location.split("?", 1)[0]:
        raise EgressDenied("backslash", "The redirect location contains a backslash.")
    try:
        joined = str(current.url.join(location))
    except (httpx2.InvalidURL, ValueError):
        raise EgressDenied("malformed", "The redirect location is not a valid URL.") from None
    target = canonicalise(joined)
    if current.scheme == "https" and target.scheme == "http":
        raise EgressDenied("https_downgrade", f"A redirect from https to http ({target.host}) was refused.")
    return redirect_request(current, target, method, headers, body, status)


def redirect_request(
    current: Target,
    target: Target,
    method: str,
    headers: httpx2.Headers,
    body: bytes | None,
    status: int | None,
) -> Hop:
    """Method, headers and body for a hop from `current` to `target` (see the module docstring)."""
    changed = not same_origin(current, target)
    new_headers = httpx2.Headers(headers)
    new_body = body
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method, new_body = "GET", None
    if changed:
        new_headers = httpx2.Headers(
            [(k, v) for k, v in headers.multi_items() if k.lower() in KEEP_ACROSS_ORIGINS]
        )
        new_body = None
    if new_body is None:
        for name in _BODY_HEADERS:
            new_headers.pop(name, None)
    return Hop(target=target, method=method, headers=new_headers, body=new_body, origin_changed=changed)
