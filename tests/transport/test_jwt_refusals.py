"""Every JWT that does not verify is a 401 with no traceback in the log: forged headers, misfit
keys, validly signed tokens whose claims have the wrong type. Run against a real server process."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.helpers import free_port, python_server

APP = "tests/servers/http_app.py"
ISSUER = "https://idp.example.com"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


def b64(data: Any) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def forged(header: Any, claims: Any = None, signature: bytes = b"\x01" * 256) -> str:
    return ".".join((b64(header), b64(claims if claims is not None else {"sub": "x"}), b64(signature)))


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Path]:
    """An RSA key with `alg` named (k1), one without (k2), and the JWKS file holding both."""
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    loose_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    named = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key()))
    named.update(kid="k1", use="sig", alg="RS256")
    loose = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(loose_key.public_key()))
    loose.update(kid="k2")
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps({"keys": [named, loose]}))
    return rsa_key, loose_key, path


def signed(key: Any, kid: str, alg: str = "RS256", **claims: Any) -> str:
    base = {"iss": ISSUER, "sub": "user-42", "exp": int(time.time()) + 300, "aud": "", "scope": "tools"}
    base.update(claims)
    return jwt.encode(
        {k: v for k, v in base.items() if v is not None}, key, algorithm=alg, headers={"kid": kid}
    )


def test_malformed_and_misfit_tokens_are_401_without_a_traceback(keys: tuple[Any, Any, Path]) -> None:
    rsa_key, loose_key, jwks = keys
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    ec_key = ec.generate_private_key(ec.SECP256R1())
    good = signed(rsa_key, "k1", aud=url)
    cases = {
        # the issue's token: an algorithm the key under that real kid does not fit
        "ES256 header on an RSA kid": forged({"alg": "ES256", "kid": "k1", "typ": "JWT"}),
        "ES256 header on an alg-less RSA kid": forged({"alg": "ES256", "kid": "k2"}),
        "ES256-signed, RSA kid": signed(ec_key, "k1", alg="ES256", aud=url),
        "ES256-signed, alg-less RSA kid": signed(ec_key, "k2", alg="ES256", aud=url),
        "PS256 on a key named RS256": signed(rsa_key, "k1", alg="PS256", aud=url),
        "EdDSA header on an RSA kid": forged({"alg": "EdDSA", "kid": "k2"}),
        "HS256 with the public key": forged({"alg": "HS256", "kid": "k1"}),
        "alg none": forged({"alg": "none", "kid": "k1"}, signature=b""),
        "alg is a list": forged({"alg": ["RS256"], "kid": "k1"}),
        "alg missing": forged({"kid": "k1"}),
        "kid is a list": forged({"alg": "RS256", "kid": ["k1"]}),
        "kid is a number": forged({"alg": "RS256", "kid": 1}),
        "header is a list": forged([1, 2]),
        "header not JSON": ".".join((b64(b"{nope"), b64({"sub": "x"}), b64(b"s"))),
        "unknown crit": forged({"alg": "RS256", "kid": "k1", "crit": ["exp"], "exp": 1}),
        "b64 false": forged({"alg": "RS256", "kid": "k1", "b64": False, "crit": ["b64"]}),
        "two segments": "a.b",
        "bad base64": good[:-3] + "!!!",
        "non-ASCII": good[:20] + "é" + good[21:],
        # validly signed, wrong claim types
        "scp is a number": signed(rsa_key, "k1", aud=url, scope=None, scp=7),
        "scp is an object": signed(rsa_key, "k1", aud=url, scope=None, scp={"tools": True}),
        "scp mixes types": signed(rsa_key, "k1", aud=url, scope=None, scp=["tools", 1]),
        "scope is a number": signed(rsa_key, "k1", aud=url, scope=12),
        "sub is a number": signed(rsa_key, "k1", aud=url, sub=42),
        "exp is a string": signed(rsa_key, "k1", aud=url, exp="soon"),
        "aud is a number": signed(rsa_key, "k1", aud=5),
        "iat in the future": signed(rsa_key, "k1", aud=url, iat=int(time.time()) + 3600),
        "nbf is a string": signed(rsa_key, "k1", aud=url, nbf="later"),
        # RFC 7519 wants JSON numbers; PyJWT would take a numeric string through int()
        "exp is a numeric string": signed(rsa_key, "k1", aud=url, exp=str(int(time.time()) + 300)),
        "nbf is a numeric string": signed(rsa_key, "k1", aud=url, nbf=str(int(time.time()) - 10)),
        "iat is a numeric string": signed(rsa_key, "k1", aud=url, iat=str(int(time.time()))),
        "exp is true": signed(rsa_key, "k1", aud=url, exp=True),
        # an empty subject is no principal: it must not get past auth as one
        "sub is empty": signed(rsa_key, "k1", aud=url, sub=""),
        "sub is blank": signed(rsa_key, "k1", aud=url, sub="   "),
    }
    with python_server([APP, str(port), "--jwks", str(jwks), "--issuer", ISSUER], port) as running:
        assert (
            httpx2.post(url, headers={**ACCEPT, "Authorization": f"Bearer {good}"}, json=INIT).status_code
            == 200
        )
        statuses = {
            name: httpx2.post(
                url, headers={**ACCEPT, "Authorization": f"Bearer {token}".encode("latin-1")}, json=INIT
            ).status_code
            for name, token in cases.items()
        }
        # validly signed and well-formed variants that must still be accepted
        scp_list = signed(rsa_key, "k1", aud=url, scope=None, scp=["tools", "read"])
        scp_text = signed(rsa_key, "k1", aud=url, scope=None, scp="tools read")
        ps256_loose = signed(loose_key, "k2", alg="PS256", aud=url)
        odd_groups = signed(rsa_key, "k1", aud=url, groups={"a": 1})  # ignored, not fatal
        fine = {
            "scp list": scp_list,
            "scp text": scp_text,
            "PS256 alg-less": ps256_loose,
            "groups": odd_groups,
        }
        accepted = {
            name: httpx2.post(
                url, headers={**ACCEPT, "Authorization": f"Bearer {token}"}, json=INIT
            ).status_code
            for name, token in fine.items()
        }
        log = running.log()
    assert statuses == dict.fromkeys(cases, 401)
    assert accepted == dict.fromkeys(accepted, 200)
    assert "Traceback" not in log
    assert "Exception in ASGI application" not in log
    for token in cases.values():
        assert token not in log
