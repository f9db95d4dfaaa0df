"""The whole guard decision for one URL, and the resolve-then-judge step the transport shares."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mcpkit.egress.addresses import IPAddress
from mcpkit.egress.errors import EgressDenied
from mcpkit.egress.policy import EgressPolicy, admit, judge
from mcpkit.egress.resolver import ResolutionFailed, Resolver
from mcpkit.egress.urls import Target, canonical_host, canonicalise

__all__ = ["Verdict", "check_url", "resolve_checked"]


@dataclass(frozen=True)
class Verdict:
    """What the guard decides about one URL.

    Attributes:
        allowed: Whether a fetch of `url` would be sent.
        reason: `ok`, or the refusal's reason code (`loopback`, `userinfo`, `port`, ...).
        message: One model-safe sentence.
        detail: Operator detail; may name resolved addresses.
        url: The canonical URL, when the URL could be read.
        addresses: The checked addresses a connection would use (empty when denied early).
    """

    allowed: bool
    reason: str
    message: str
    detail: str
    url: str | None = None
    addresses: tuple[IPAddress, ...] = ()


async def resolve_checked(host: str, port: int, policy: EgressPolicy, resolver: Resolver) -> list[IPAddress]:
    """Resolve `host` once and judge every answer; any refused answer refuses the host.

    Args:
        host: A canonical host (name or IP literal, as in `Target.host`).
        port: The port to be dialled (passed to the resolver).
        policy: Supplies the address judge.
        resolver: Asked exactly once, unless `host` is an IP literal (then never).

    Returns:
        The checked addresses, in the order to try them.

    Raises:
        EgressDenied: `unresolvable`, or the judge's reason for the first refused answer.
    """
    target_ip = _literal(host)
    if target_ip is not None:
        judge(target_ip, policy, host, literal=True)
        return [target_ip]
    try:
        addresses = list(await resolver.resolve(host, port))
    except ResolutionFailed as exc:
        raise EgressDenied("unresolvable", f"The host {host} could not be resolved.", str(exc)) from None
    if not addresses:
        raise EgressDenied("unresolvable", f"The host {host} could not be resolved.", f"{host}: empty answer")
    for address in addresses:
        judge(address, policy, host, literal=False)
    return addresses


def _literal(host: str) -> IPAddress | None:
    try:
        return canonical_host(host, bracketed=":" in host)[1]
    except EgressDenied:
        return None


async def check_url(url: str, policy: EgressPolicy, resolver: Resolver) -> Verdict:
    """Decide whether the guard would fetch `url`, resolving its host once.

    Args:
        url: The URL as a tool or operator wrote it.
        policy: The egress policy.
        resolver: The resolver (a `StaticResolver` in tests and for `--resolve`).

    Returns:
        A `Verdict`; never raises for a refused URL.
    """
    target: Target | None = None
    try:
        target = canonicalise(url)
        admit(target, policy)
        addresses: Sequence[IPAddress] = await resolve_checked(target.host, target.port, policy, resolver)
    except EgressDenied as denied:
        return Verdict(
            allowed=False,
            reason=denied.reason,
            message=denied.message,
            detail=denied.detail,
            url=None if target is None else str(target.url),
        )
    shown = ", ".join(str(a) for a in addresses)
    return Verdict(
        allowed=True,
        reason="ok",
        message=f"Egress to {target.host} is allowed.",
        detail=f"{target.host} -> {shown}",
        url=str(target.url),
        addresses=tuple(addresses),
    )
