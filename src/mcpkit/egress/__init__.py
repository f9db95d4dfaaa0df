"""Guarded egress: the one HTTP path of an mcpkit server, with an SSRF guard that cannot be walked around.

Parts, one responsibility each: `addresses` (IANA tables, the address judge), `urls`
(canonicalisation), `policy` (allowlist, ports, limits), `resolver`, `check` (the decision for
one URL), `transport` (dial only checked addresses), `redirects`, `templates`, `body` (capped
reading), `responses` (status and JSON mapping), `oauth2`, `client`, `cli`, `mock` (the test seam).
"""

__all__ = [
    "AddressJudge",
    "BadUpstreamResponse",
    "Denial",
    "EgressDenied",
    "EgressPolicy",
    "GuardedClient",
    "GuardedTransport",
    "MockEgress",
    "OAuth2ClientCredentials",
    "ResolutionFailed",
    "Resolver",
    "ResponseTooLarge",
    "SecretLookup",
    "StaticResolver",
    "SystemResolver",
    "UpstreamError",
    "UpstreamStatusError",
    "Verdict",
    "check_url",
    "judge_address",
]

from mcpkit.egress.addresses import AddressJudge, Denial, judge_address
from mcpkit.egress.check import Verdict, check_url
from mcpkit.egress.client import GuardedClient
from mcpkit.egress.errors import (
    BadUpstreamResponse,
    EgressDenied,
    ResponseTooLarge,
    UpstreamError,
    UpstreamStatusError,
)
from mcpkit.egress.mock import MockEgress
from mcpkit.egress.oauth2 import OAuth2ClientCredentials, SecretLookup
from mcpkit.egress.policy import EgressPolicy
from mcpkit.egress.resolver import ResolutionFailed, Resolver, StaticResolver, SystemResolver
from mcpkit.egress.transport import GuardedTransport
