"""OAuth 2.0 client credentials (RFC 6749 section 4.4) for one upstream API host.

The configuration holds secret *names*; values are read through a lookup bound by the server, at
mint time only. The token is minted once for any number of concurrent callers, cached until
shortly before it expires, refreshed after, and dropped when the API answers 401. It is
attached only to https requests for `api_host`, never to the token call (which is sent through
the same egress guard, without redirects) and never to another host.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote, urlencode

import anyio
import httpx2

from mcpkit.egress.errors import EgressDenied, UpstreamError, UpstreamStatusError
from mcpkit.egress.urls import Target, canonical_host, canonicalise
from mcpkit.errors import DefinitionError, ToolError
from mcpkit.logs import Redactor

__all__ = ["OAuth2ClientCredentials", "SecretLookup", "TokenSender", "TokenSource"]

SecretLookup = Callable[[str], str | None]
"""Secret name -> value (None when unset); may raise its own model-safe `ToolError`."""

TokenSender = Callable[[Target, httpx2.Headers, bytes], Awaitable[httpx2.Response]]
"""Sends one guarded request (no redirects, no bearer) and returns the read response."""

_ERROR_CODE = re.compile(r"[a-z_]{1,40}")
DEFAULT_LIFETIME_S = 300.0


@dataclass(frozen=True)
class OAuth2ClientCredentials:
    """Client-credentials configuration for calls to one API host.

    Args:
        token_url: The token endpoint; must be https.
        client_id_secret: Name of the secret holding the client id.
        client_secret_secret: Name of the secret holding the client secret.
        scope: Space-separated scopes to request, if any.
        api_host: The host (or `host:port`) the bearer token is sent to; required.
        client_auth: `basic` (HTTP Basic, RFC 6749's default) or `post` (credentials in the form).
        refresh_margin_s: Refresh this long before expiry (at most half the token's lifetime).
    """

    token_url: str
    client_id_secret: str
    client_secret_secret: str
    scope: str | None = None
    api_host: str | None = None
    client_auth: Literal["basic", "post"] = "basic"
    refresh_margin_s: float = 30.0

    def __post_init__(self) -> None:
        try:
            target = canonicalise(self.token_url)
        except EgressDenied as exc:
            raise DefinitionError(f"OAuth2 token_url is not a usable URL: {exc.message}") from None
        if target.scheme != "https":
            raise DefinitionError("OAuth2 token_url must be https: the client secret travels in it")
        if not self.api_host:
            raise DefinitionError(
                "OAuth2ClientCredentials needs api_host: the only host the token is sent to"
            )
        if not self.client_id_secret or not self.client_secret_secret:
            raise DefinitionError(
                "OAuth2ClientCredentials needs the names of the client id and secret secrets"
            )
        if self.client_auth not in ("basic", "post"):
            raise DefinitionError("OAuth2 client_auth must be 'basic' or 'post'")
        self.api_origin()  # validates

    def api_origin(self) -> tuple[str, int | None]:
        """(canonical host, port or None for any) of `api_host`."""
        text = self.api_host or ""
        host_text, sep, port_text = text.rpartition(":") if text.count(":") == 1 else (text, "", "")
        try:
            host, _ = canonical_host(host_text if sep else text)
            port = int(port_text) if sep else None
        except (EgressDenied, ValueError):
            raise DefinitionError(f"OAuth2 api_host {text!r} is not a host or host:port") from None
        return host, port

    def bind(self, secret: SecretLookup, clock: Callable[[], float] = time.monotonic) -> TokenSource:
        """A token source for one server: this configuration, its secret lookup, its own cache."""
        return TokenSource(self, secret, clock)


class TokenSource:
    """Mints, caches and refreshes the bearer token of one `OAuth2ClientCredentials`.

    Each token minted is registered with the redactors given to `register_secrets`, so it never
    reaches a log line or a tool result, like a declared secret. The token before the current one
    stays registered (a call may still hold it); the one before that is dropped, since it has
    expired or been rejected by then (a refresh comes at least half a lifetime after its mint).
    """

    def __init__(
        self, config: OAuth2ClientCredentials, secret: SecretLookup, clock: Callable[[], float]
    ) -> None:
        self.config = config
        self._secret = secret
        self._clock = clock
        self._token_target = canonicalise(config.token_url)
        self._api_host, self._api_port = config.api_origin()
        self._token: str | None = None
        self._refresh_at = 0.0
        self._lock = anyio.Lock()
        self._redactors: list[Redactor] = []
        self._registered: list[str] = []  # the previous and the current token, oldest first
        self.minted = 0

    def register_secrets(self, redactor: Redactor) -> None:
        """Have `redactor` scrub every token this source mints (and the ones it holds now)."""
        if redactor not in self._redactors:
            self._redactors.append(redactor)
            for token in self._registered:
                redactor.add(token)

    def _remember(self, token: str) -> None:
        for redactor in self._redactors:
            redactor.add(token)
        self._registered.append(token)
        while len(self._registered) > 2:
            old = self._registered.pop(0)
            for redactor in self._redactors:
                redactor.discard(old)

    @property
    def token_target(self) -> Target:
        """The canonical token endpoint."""
        return self._token_target

    def applies_to(self, target: Target) -> bool:
        """Whether a request to `target` gets the bearer: https, `api_host`, and its port if named."""
        return (
            target.scheme == "https"
            and target.host == self._api_host
            and (self._api_port is None or target.port == self._api_port)
        )

    async def token(self, send: TokenSender) -> str:
        """A valid access token; concurrent callers share one mint."""
        if self._token is not None and self._clock() < self._refresh_at:
            return self._token
        async with self._lock:
            if self._token is not None and self._clock() < self._refresh_at:
                return self._token
            token, lifetime = await self._mint(send)
            self._remember(token)  # before any caller can put it in a result or a log line
            margin = min(self.config.refresh_margin_s, lifetime / 2)
            self._token, self._refresh_at = token, self._clock() + lifetime - margin
            self.minted += 1
            return token

    def invalidate(self, token: str) -> None:
        """Forget `token` (the API rejected it) so the next call mints a fresh one."""
        if self._token == token:
            self._token = None

    def _credentials(self) -> tuple[str, str]:
        values = []
        for name in (self.config.client_id_secret, self.config.client_secret_secret):
            value = self._secret(name)
            if not value:
                raise ToolError(f"OAuth2 is not configured: the secret {name} is not set.")
            values.append(value)
        return values[0], values[1]

    async def _mint(self, send: TokenSender) -> tuple[str, float]:
        client_id, client_secret = self._credentials()
        form = {"grant_type": "client_credentials"}
        if self.config.scope:
            form["scope"] = self.config.scope
        headers = httpx2.Headers(
            {"content-type": "application/x-www-form-urlencoded", "accept": "application/json"}
        )
        if self.config.client_auth == "basic":
            pair = f"{quote(client_id, safe='')}:{quote(client_secret, safe='')}".encode()
            headers["authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        else:
            form.update(client_id=client_id, client_secret=client_secret)
        response = await send(self._token_target, headers, urlencode(form).encode("ascii"))
        payload = self._payload(response)
        if response.status_code != 200:
            code = payload.get("error") if isinstance(payload, dict) else None
            said = f" ({code})" if isinstance(code, str) and _ERROR_CODE.fullmatch(code) else ""
            raise UpstreamStatusError(
                response.status_code,
                f"The authorization server refused the token request (HTTP {response.status_code}){said}.",
                retryable=response.status_code == 429 or response.status_code >= 500,
            )
        return self._parse(payload)

    @staticmethod
    def _payload(response: httpx2.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            return None

    def _parse(self, payload: Any) -> tuple[str, float]:
        bad = UpstreamError("The authorization server returned an unusable token response.")
        if not isinstance(payload, dict):
            raise bad
        token = payload.get("access_token")
        kind = payload.get("token_type", "bearer")
        if not isinstance(token, str) or not token or not isinstance(kind, str) or kind.lower() != "bearer":
            raise bad
        if any(c in token for c in "\r\n") or not token.isascii():
            raise bad
        expires = payload.get("expires_in", DEFAULT_LIFETIME_S)
        try:
            lifetime = float(expires)
        except (TypeError, ValueError):
            raise bad from None
        if not lifetime > 0:
            raise bad
        return token, min(lifetime, 86400.0)
