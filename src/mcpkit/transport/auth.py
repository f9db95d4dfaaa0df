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
from typing import Any

import anyio
import jwt
from mcp.server.auth.provider import AccessToken

from mcpkit.egress import GuardedClient
from mcpkit.errors import DefinitionError, ToolError

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
        self.resource = resource

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
    _keys: dict[str, Any] = field(default_factory=dict, init=False)
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
        try:
            header = jwt.get_unverified_header(token)
            key = await self._key(str(header.get("kid", "")))
            if key is None:
                log.info("bearer token refused: unknown signing key")
                return None
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=list(self.algorithms),
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway_s,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            log.info("bearer token refused: %s", type(exc).__name__)
            return None
        scopes = claims.get("scope", "")
        scope_list = scopes.split() if isinstance(scopes, str) else [str(s) for s in claims.get("scp", [])]
        return AccessToken(
            token=token,
            client_id=str(claims["sub"]),
            scopes=scope_list,
            expires_at=int(claims["exp"]),
            resource=self.audience,
            subject=str(claims["sub"]),
            claims={"iss": claims["iss"], "groups": _groups(claims.get(self.groups_claim))},
        )

    def _stale(self, kid: str) -> bool:
        age = time.monotonic() - self._fetched
        # Keys expire after refresh_s; an unknown key id refetches, but at most every 30 s.
        return age > self.refresh_s or (kid not in self._keys and age > _UNKNOWN_KID_REFETCH_S)

    async def _key(self, kid: str) -> Any:
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


def _groups(value: Any) -> list[str]:
    """A groups claim as a list of names: a JSON array of strings, or one space-separated string."""
    names = value.split() if isinstance(value, str) else value if isinstance(value, list) else []
    return [n[:256] for n in names if isinstance(n, str) and n][:_MAX_GROUPS]


def _read_jwks_file(path: str) -> dict[str, Any]:
    """The keys of a JWKS file (a few kilobytes: read in place)."""
    return _parse_jwks(json.loads(Path(path).read_text(encoding="utf-8")))


def _parse_jwks(document: Any) -> dict[str, Any]:
    """Key id -> verification key of a JWKS document."""
    if not isinstance(document, Mapping):
        raise ValueError("a JWKS document is a JSON object with a 'keys' array")
    return {str(jwk.key_id or ""): jwk.key for jwk in jwt.PyJWKSet.from_dict(dict(document)).keys}


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
