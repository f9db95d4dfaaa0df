"""`JWTVerifier` with a JWKS URL: fetched over real TLS through the egress guard, cached, rotated,
and kept through an identity provider's outage."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from mcpkit.egress import EgressPolicy, GuardedClient, StaticResolver
from mcpkit.errors import DefinitionError
from mcpkit.transport import auth
from mcpkit.transport.auth import JWTVerifier
from tests.egress.egress_support import Reply, Seen, TestCA, TestServer, loopback_policy

pytestmark = pytest.mark.anyio

ISSUER = "https://idp.test"
AUDIENCE = "https://mcp.example.com/mcp"


class IdP:
    """An identity provider's signing keys, published as a JWKS the test server answers with."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}
        self.status = 200
        self.rotate("k1")

    def rotate(self, kid: str) -> None:
        self.keys[kid] = ec.generate_private_key(ec.SECP256R1())

    def retire(self, kid: str) -> None:
        del self.keys[kid]

    def jwks(self, seen: Seen) -> Reply:
        if self.status != 200:
            return Reply(self.status, (("content-type", "text/plain"),), b"identity provider down")
        published = []
        for kid, key in self.keys.items():
            jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
            jwk.update(kid=kid, use="sig", alg="ES256")
            published.append(jwk)
        return Reply(200, (("content-type", "application/json"),), json.dumps({"keys": published}).encode())

    def mint(self, kid: str, **claims: Any) -> str:
        body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "user-7", "exp": int(time.time()) + 300}
        body.update(claims)
        return jwt.encode(body, self.keys[kid], algorithm="ES256", headers={"kid": kid})


def verifier_for(server: TestServer, test_ca: TestCA, policy: EgressPolicy | None = None) -> JWTVerifier:
    egress = GuardedClient(
        policy or loopback_policy(f"api.test:{server.port}"),
        resolver=StaticResolver({"api.test": ["127.0.0.1"]}),
        ssl_context=test_ca.client_context(),
    )
    return JWTVerifier(
        issuer=ISSUER, audience=AUDIENCE, jwks=f"https://api.test:{server.port}/jwks", egress=egress
    )


async def test_keys_fetched_once_over_tls_and_tokens_checked(test_ca: TestCA) -> None:
    idp = IdP()
    async with TestServer(idp.jwks, ssl_context=test_ca.server_context()) as server:
        verifier = verifier_for(server, test_ca)
        token = await verifier.verify_token(idp.mint("k1"))
        assert token is not None and token.subject == "user-7" and token.resource == AUDIENCE
        for _ in range(5):
            assert await verifier.verify_token(idp.mint("k1")) is not None
        assert await verifier.verify_token(idp.mint("k1", aud="https://other.example.com/mcp")) is None
        assert await verifier.verify_token(idp.mint("k1", iss="https://evil.test")) is None
        assert await verifier.verify_token(idp.mint("k1", exp=int(time.time()) - 3600)) is None
    assert len(server.seen) == 1, "the JWKS is cached, not fetched per token"
    assert server.seen[0].sni == "api.test" and server.seen[0].target == "/jwks"


async def test_rotated_key_is_fetched_but_unknown_kids_cannot_hammer_the_idp(
    test_ca: TestCA, monkeypatch: pytest.MonkeyPatch
) -> None:
    idp = IdP()
    async with TestServer(idp.jwks, ssl_context=test_ca.server_context()) as server:
        verifier = verifier_for(server, test_ca)
        assert await verifier.verify_token(idp.mint("k1")) is not None
        idp.rotate("k2")
        # Within the back-off an unknown kid does not refetch: forged kids cannot flood the IdP.
        for _ in range(10):
            assert await verifier.verify_token(idp.mint("k2")) is None
        assert len(server.seen) == 1
        monkeypatch.setattr(auth, "_UNKNOWN_KID_REFETCH_S", 0.0)
        assert await verifier.verify_token(idp.mint("k2")) is not None
        assert len(server.seen) == 2


async def test_an_idp_outage_keeps_the_keys_already_known(
    test_ca: TestCA, caplog: pytest.LogCaptureFixture
) -> None:
    idp = IdP()
    async with TestServer(idp.jwks, ssl_context=test_ca.server_context()) as server:
        verifier = verifier_for(server, test_ca)
        verifier.refresh_s = 0.0  # every call wants fresh keys
        assert await verifier.verify_token(idp.mint("k1")) is not None
        idp.status = 503
        with caplog.at_level(logging.WARNING, logger="mcpkit.auth"):
            assert await verifier.verify_token(idp.mint("k1")) is not None
        assert "keeping 1 known key(s)" in caplog.text
        assert len(server.seen) == 2


async def test_no_keys_at_all_refuses_the_token_without_raising(
    test_ca: TestCA, caplog: pytest.LogCaptureFixture
) -> None:
    idp = IdP()
    idp.status = 500
    async with TestServer(idp.jwks, ssl_context=test_ca.server_context()) as server:
        verifier = verifier_for(server, test_ca)
        with caplog.at_level(logging.WARNING, logger="mcpkit.auth"):
            assert await verifier.verify_token(idp.mint("k1")) is None
        assert "could not be loaded" in caplog.text
        # The token itself never reaches the log.
        assert idp.mint("k1").split(".")[0] not in caplog.text


async def test_jwks_url_is_held_to_the_egress_guard(test_ca: TestCA) -> None:
    idp = IdP()
    async with TestServer(idp.jwks, ssl_context=test_ca.server_context()) as server:
        # The production judge: api.test resolves to loopback, so the fetch is refused before connecting.
        verifier = verifier_for(server, test_ca, EgressPolicy(allow=[f"api.test:{server.port}"]))
        assert await verifier.verify_token(idp.mint("k1")) is None
        # A certificate the client does not trust is refused too.
        other_ca = TestCA(["api.test"])
        untrusted = verifier_for(server, other_ca)
        assert await untrusted.verify_token(idp.mint("k1")) is None
    assert server.seen == []


def test_configuration_errors_stop_start_up(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError, match="https"):
        JWTVerifier(issuer=ISSUER, audience=AUDIENCE, jwks="http://idp.test/jwks")
    with pytest.raises(DefinitionError, match="egress"):
        JWTVerifier(issuer=ISSUER, audience=AUDIENCE, jwks="https://idp.test/jwks")
    with pytest.raises(DefinitionError, match="JWKS file"):
        JWTVerifier(issuer=ISSUER, audience=AUDIENCE, jwks=str(tmp_path / "missing.json"))
    broken = tmp_path / "broken.json"
    broken.write_text('{"keys": "not a list"}')
    with pytest.raises(DefinitionError, match="JWKS file"):
        JWTVerifier(issuer=ISSUER, audience=AUDIENCE, jwks=str(broken))
