"""The SSRF corpus: URLs a naive guard lets through, each refused for the right reason; public ones allowed.

Every URL is checked twice: by `check_url` (what `mcpkit egress check` prints) and by a real
`GuardedClient.fetch`, whose transport must refuse before any byte leaves (the resolver is
static, so nothing here touches a network).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcpkit.egress import EgressDenied, EgressPolicy, GuardedClient, StaticResolver, check_url

CORPUS = Path(__file__).parent / "corpus"
DENY: list[dict[str, Any]] = json.loads((CORPUS / "deny.json").read_text("utf-8"))
ALLOW: list[dict[str, Any]] = json.loads((CORPUS / "allow.json").read_text("utf-8"))
BASE_ANSWERS: dict[str, list[str]] = json.loads((CORPUS / "resolve.json").read_text("utf-8"))

pytestmark = pytest.mark.anyio


def _setup(case: dict[str, Any]) -> tuple[EgressPolicy, StaticResolver]:
    answers = {**BASE_ANSWERS, **case.get("resolve", {})}
    allow = case.get("allow")
    return EgressPolicy(allow=None if allow is None else tuple(allow)), StaticResolver(answers)


def test_corpus_is_big_and_covers_every_class() -> None:
    assert len(DENY) >= 80
    reasons = {case["reason"] for case in DENY}
    assert reasons >= {
        "loopback",
        "private",
        "link_local",
        "cgnat",
        "multicast",
        "reserved",
        "unspecified",
        "broadcast",
        "documentation",
        "benchmarking",
        "embedded_ipv4",
        "unique_local",
        "site_local",
        "userinfo",
        "backslash",
        "host",
        "numeric_host",
        "port",
        "scheme",
        "malformed",
        "not_allowlisted",
        "unresolvable",
    }
    assert len({case["url"] for case in DENY}) == len(DENY)


@pytest.mark.parametrize("case", DENY, ids=[f"{c['reason']}:{c['url']!r}" for c in DENY])
async def test_denied(case: dict[str, Any]) -> None:
    policy, resolver = _setup(case)
    verdict = await check_url(case["url"], policy, resolver)
    assert not verdict.allowed, case["why"]
    assert verdict.reason == case["reason"], (case["why"], verdict.detail)
    assert verdict.addresses == ()


@pytest.mark.parametrize("case", DENY, ids=[f"{c['reason']}:{c['url']!r}" for c in DENY])
async def test_denied_by_the_client_too(case: dict[str, Any]) -> None:
    policy, resolver = _setup(case)
    async with GuardedClient(policy, resolver=resolver) as client:
        with pytest.raises(EgressDenied) as caught:
            await client.fetch(case["url"])
    assert caught.value.reason == case["reason"]
    assert caught.value.code == "REFUSED"
    assert not caught.value.retryable
    # the model-visible message never shows an address a resolver returned (unless the URL did)
    for addresses in case.get("resolve", {}).values():
        for address in addresses:
            assert address in case["url"] or address not in caught.value.message


@pytest.mark.parametrize("case", ALLOW, ids=[c["url"] for c in ALLOW])
async def test_allowed(case: dict[str, Any]) -> None:
    policy, resolver = _setup(case)
    verdict = await check_url(case["url"], policy, resolver)
    assert verdict.allowed, (case["why"], verdict.reason, verdict.detail)
    assert verdict.url == case["canonical"]
    assert verdict.addresses
