"""Bearer-token verification for Streamable HTTP, on the SDK's `TokenVerifier` protocol.

Two verifiers: `StaticTokens` (a `principal token [scopes]` file, for small deployments) and
`JWTVerifier` (issuer, audience = this server's resource URL, expiry, keys from a JWKS file or URL
fetched through the guarded egress). Tokens are never logged: failures log the reason only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import jwt
from mcp.server.auth.provider import AccessToken

from mcpkit.egress import GuardedClient
from mcpkit.errors import DefinitionError, ToolError

if TYPE_CHECKING:
    from mcpkit.logs import Redactor

__all__ = ["HttpAuth", "JWTVerifier", "StaticTokens", "load_tokens"]

log = logging.getLogger("mcpkit.auth")
_UNKNOWN_KID_REFETCH_S = 30.0
_MAX_GROUPS = 256


@dataclass(frozen=True)
class _Entry:
    principal: str
    digest: bytes
    scopes: tuple[str, ...]


def load_tokens(text: str, *, source: str = "tokens") -> list[tuple[str, str, tuple[str, ...]]]:
    """Parse `principal token [scope,scope]` lines (blank lines and `#` comments skipped).

    >>> load_tokens("alice s3cr3t-token-1 read,write\\n# ops\\nbob s3cr3t-token-2")
    [('alice', 's3cr3t-token-1', ('read', 'write')), ('bob', 's3cr3t-token-2', ())]
    """
    out: list[tuple[str, str, tuple[str, ...]]] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) not in (2, 3):
            raise DefinitionError(f"{source}:{number}: expected 'principal token [scopes]'")
        principal, token = parts[0], parts[1]
        if len(token) < 16:
            raise DefinitionError(
                f"{source}:{number}: the token of {principal!r} is shorter than 16 characters"
            )
        scopes = tuple(s for s in parts[2].split(",") if s) if len(parts) == 3 else ()
        out.append((principal, token, scopes))
    if not out:
        raise DefinitionError(f"{source}: no tokens")
    return out


class StaticTokens:
    """A fixed set of bearer tokens, each naming its principal; compared in constant time."""

    def __init__(
        self, entries: Sequence[tuple[str, str, tuple[str, ...]]], resource: str | None = None
    ) -> None:
        self._entries = [_Entry(p, hashlib.sha256(t.encode()).digest(), s) for p, t, s in entries]
        self._tokens = tuple(t for _, t, _ in entries)  # only for the log redactor
        self.resource = resource

    def register_secrets(self, redactor: Redactor) -> None:
        """Have `redactor` scrub every token from the operator's log (a token pasted into a query, say)."""
        for token in self._tokens:
            redactor.add(token)

    @classmethod
    def from_file(cls, path: str | Path, resource: str | None = None) -> StaticTokens:
        """Load a tokens file (`principal token [scopes]` a line)."""
        p = Path(path)
        return cls(load_tokens(p.read_text(encoding="utf-8"), source=str(p)), resource)

    async def verify_token(self, token: str) -> AccessToken | None:
        presented = hashlib.sha256(token.encode()).digest()
        found: _Entry | None = None
        for entry in self._entries:  # no early exit: the time taken does not depend on which matched
            if hmac.compare_digest(entry.digest, presented):
                found = entry
        if found is None:
            log.info("bearer token refused: unknown token")
            return None
        return AccessToken(
            token=token, client_id=found.principal, scopes=list(found.scopes), resource=self.resource
        )


@dataclass
class JWTVerifier:
    """Verifies JWT access tokens from an identity provider.

    Args:
        issuer: The expected `iss`.
        audience: The expected `aud`: this server's resource URL (RFC 8707); tokens for any other
            audience are refused, so no token passes through from another service.
        jwks: A JWKS document: a path to a file, or an https URL fetched through the egress guard.
        algorithms: Accepted signature algorithms (never "none").
        egress: The guarded client used to fetch a JWKS URL.
        refresh_s: How long fetched keys are trusted before they are fetched again.
        groups_claim: The claim listing the caller's groups (`ctx.groups`, `--role-map` groups:).
    """

    issuer: str
    audience: str
    jwks: str
    algorithms: Sequence[str] = ("RS256", "ES256", "PS256", "EdDSA")
    egress: GuardedClient | None = None
    refresh_s: float = 600.0
    leeway_s: float = 30.0
    groups_claim: str = "groups"
    _keys: dict[str, _Key] = field(default_factory=dict, init=False)
    _fetched: float = field(default=0.0, init=False)
    _lock: anyio.Lock = field(default_factory=anyio.Lock, init=False)

    def __post_init__(self) -> None:
        if not self.algorithms or any(a.lower() == "none" or a.startswith("HS") for a in self.algorithms):
            raise DefinitionError("JWTVerifier accepts asymmetric algorithms only")
        if self.jwks.startswith("http://"):
            raise DefinitionError("a JWKS URL must be https")
        if self.jwks.startswith("https://"):
            if self.egress is None:
                raise DefinitionError("a JWKS URL is fetched through the egress guard: pass egress=")
            return
        # A file is read now, so a wrong path or a broken document stops start-up, not the first call.
        try:
            self._keys = _read_jwks_file(self.jwks)
        except (OSError, ValueError, jwt.PyJWTError) as exc:
            raise DefinitionError(f"JWKS file {self.jwks}: {exc}") from exc
        self._fetched = time.monotonic()

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's principal, or None (the SDK answers 401) for any token that does not verify.

        Every failure is a refusal, never an exception: a malformed header, a key that does not fit
        the header's algorithm, a claim of the wrong type. The log names the reason, never the token.
        """
        try:
            return await self._verify(token)
        except jwt.PyJWTError as exc:
            log.info("bearer token refused: %s", type(exc).__name__)
        except _BadClaim as exc:
            log.info("bearer token refused: %s", exc)
        except Exception as exc:  # fail closed: an unforeseen token shape is a 401, never a 500
            log.warning("bearer token refused: unexpected %s while verifying", type(exc).__name__)
        return None

    async def _verify(self, token: str) -> AccessToken | None:
        header = jwt.get_unverified_header(token)
        kid, alg = header.get("kid", ""), header.get("alg")
        if not isinstance(kid, str) or not isinstance(alg, str) or alg not in self.algorithms:
            raise _BadClaim("header names no accepted algorithm or a non-string key id")
        jwk = await self._key(kid)
        if jwk is None:
            log.info("bearer token refused: unknown signing key")
            return None
        key = jwk.for_alg(alg)
        claims: dict[str, Any] = jwt.decode(
            token,
            key=key,
            algorithms=[alg],
            audience=self.audience,
            issuer=self.issuer,
            leeway=self.leeway_s,
            options={"require": ["exp", "iss", "aud", "sub"]},
        )
        _check_claim_types(claims)
        return AccessToken(
            token=token,
            client_id=str(claims["sub"]),
            scopes=_scopes(claims),
            expires_at=int(claims["exp"]),
            resource=self.audience,
            subject=str(claims["sub"]),
            claims={"iss": claims["iss"], "groups": _groups(claims.get(self.groups_claim))},
        )

    def _stale(self, kid: str) -> bool:
        age = time.monotonic() - self._fetched
        # Keys expire after refresh_s; an unknown key id refetches, but at most every 30 s.
        return age > self.refresh_s or (kid not in self._keys and age > _UNKNOWN_KID_REFETCH_S)

    async def _key(self, kid: str) -> _Key | None:
        if self._stale(kid):
            async with self._lock:
                if self._stale(kid):
                    await self._refresh()
        if kid:
            return self._keys.get(kid)
        return next(iter(self._keys.values())) if len(self._keys) == 1 else None

    async def _refresh(self) -> None:
        """Reload the keys; when that fails, keep the keys already held (an identity provider's
        blip must not lock every client out) and try again after the unknown-key back-off."""
        try:
            if self.egress is not None and self.jwks.startswith("https://"):
                self._keys = _parse_jwks(await self.egress.fetch_json(self.jwks))
            else:
                self._keys = _read_jwks_file(self.jwks)
        except (ToolError, OSError, ValueError, jwt.PyJWTError) as exc:
            log.warning(
                "JWKS %s could not be loaded (%s: %s); keeping %d known key(s)",
                self.jwks,
                type(exc).__name__,
                exc,
                len(self._keys),
            )
            self._fetched = time.monotonic() - max(self.refresh_s - _UNKNOWN_KID_REFETCH_S, 0.0)
            return
        self._fetched = time.monotonic()


class _BadClaim(ValueError):
    """A signed token whose header or claims have the wrong shape."""


@dataclass
class _Key:
    """One JWKS entry, bound to each algorithm it has been used with (built once per algorithm)."""

    jwk: dict[str, Any]
    bound: dict[str, jwt.PyJWK] = field(default_factory=dict)

    def for_alg(self, alg: str) -> jwt.PyJWK:
        """This key bound to `alg`, refusing an algorithm the key was not made for.

        An entry that names its `alg` is used with that algorithm only; one that does not may be
        used with an accepted algorithm of its key type (an RSA key with RS256 or PS256), never
        with another type's (an ES256 header on an RSA key): PyJWT raises `InvalidKeyError`, and
        then verifies with the bound algorithm whatever else the header says.
        """
        named = self.jwk.get("alg")
        if named and named != alg:
            raise _BadClaim(f"the key is for {named}, the token says {alg}")
        key = self.bound.get(alg)
        if key is None:
            key = self.bound[alg] = jwt.PyJWK(self.jwk, algorithm=alg)
        return key


def _check_claim_types(claims: Mapping[str, Any]) -> None:
    """RFC 7519 4.1: the time claims are JSON numbers and `sub` a string; an empty subject names nobody.

    PyJWT converts a time claim with `int()`, so `"exp": "1765000000"` would pass; and a token
    whose `sub` is empty would be served as no principal at all, yet still get past auth.
    """
    for name in ("exp", "nbf", "iat"):
        value = claims.get(name)
        if name in claims and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise _BadClaim(f"the {name} claim is not a number")
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject.strip():
        raise _BadClaim("the sub claim is empty or not a string")


def _scopes(claims: Mapping[str, Any]) -> list[str]:
    """`scope` (a space-separated string, RFC 9068) or `scp` (a string or a list of strings)."""
    value = claims["scope"] if "scope" in claims else claims.get("scp", [])
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return list(value)
    raise _BadClaim("the scope claim is neither a string nor a list of strings")


def _groups(value: Any) -> list[str]:
    """A groups claim as a list of names: a JSON array of strings, or one space-separated string.

    Names are kept whole and none is dropped: they pick the caller's role, so a cut name could
    match another group's mapping and a dropped one could turn an ambiguous caller into a mapped
    one. A claim past the bound refuses the token.
    """
    names = value.split() if isinstance(value, str) else value if isinstance(value, list) else []
    kept = [n for n in names if isinstance(n, str) and n]
    if len(kept) > _MAX_GROUPS:
        raise _BadClaim(f"the groups claim lists more than {_MAX_GROUPS} groups")
    return kept


def _read_jwks_file(path: str) -> dict[str, _Key]:
    """The keys of a JWKS file (a few kilobytes: read in place)."""
    return _parse_jwks(json.loads(Path(path).read_text(encoding="utf-8")))


def _parse_jwks(document: Any) -> dict[str, _Key]:
    """Key id -> key of a JWKS document (PyJWT checks every entry now, so a bad one stops a load)."""
    if not isinstance(document, Mapping):
        raise ValueError("a JWKS document is a JSON object with a 'keys' array")
    entries = document.get("keys")
    if not isinstance(entries, list) or not entries:
        raise ValueError("the JWKS has no 'keys'")
    keys: dict[str, _Key] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        try:
            jwt.PyJWK(entry)  # skip what PyJWT cannot use, as PyJWKSet does
        except jwt.PyJWTError:
            continue
        keys[str(entry.get("kid") or "")] = _Key(dict(entry))
    if not keys:
        raise ValueError("the JWKS has no usable keys")
    return keys


@dataclass(frozen=True)
class HttpAuth:
    """Bearer-token auth for Streamable HTTP.

    Args:
        verifier: `StaticTokens`, `JWTVerifier`, or any SDK `TokenVerifier`.
        resource_url: This server's public URL (`https://mcp.example.com/mcp`): the audience
            tokens must be issued for, and where the protected-resource metadata points.
        authorization_servers: The issuers clients should get tokens from (RFC 9728 metadata).
        required_scopes: Scopes every request needs; short of them, 403 `insufficient_scope`.
    """

    verifier: Any
    resource_url: str
    authorization_servers: Sequence[str] = ()
    required_scopes: Sequence[str] = ()
