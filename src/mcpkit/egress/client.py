"""The guarded egress client: the only way a tool reaches the network.

Layers, outermost first (each one concern, as in httpx):

    fetch / fetch_json     deadline, templates, query, headers, JSON status mapping
    _send_with_auth        bearer for `api_host`; one retry with a fresh token after 401
    _send_following        our own redirect loop: every hop canonicalised and admitted again
    _send_once             one request on the transport, body read under the byte cap
    GuardedTransport       re-admits the URL; its backend resolves once and dials checked IPs

There is no `httpx2.AsyncClient` inside: nothing here reads the environment (no proxies,
no `SSL_CERT_FILE`, no netrc; in httpx terms `trust_env` is off by construction), no cookie
jar carries state from one tool call to the next, and no default redirect or auth handling can
run around the checks.
"""

from __future__ import annotations

import json as jsonlib
import re
import ssl
from collections.abc import Mapping
from importlib import metadata
from types import TracebackType
from typing import Any, Self, TypeVar, overload

import anyio
import httpx2

from mcpkit.egress.body import read_capped
from mcpkit.egress.errors import EgressDenied, UpstreamError
from mcpkit.egress.oauth2 import OAuth2ClientCredentials, SecretLookup, TokenSource
from mcpkit.egress.policy import EgressPolicy, admit
from mcpkit.egress.redirects import REDIRECT_STATUSES, next_hop
from mcpkit.egress.resolver import Resolver, SystemResolver
from mcpkit.egress.responses import ErrorMap, decode_json, raise_for_upstream_status
from mcpkit.egress.templates import expand_template
from mcpkit.egress.transport import GuardedTransport
from mcpkit.egress.urls import Target, canonicalise
from mcpkit.errors import DefinitionError, ToolTimeout
from mcpkit.logs import Redactor

__all__ = ["GuardedClient", "default_user_agent"]

T = TypeVar("T")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_FORBIDDEN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "te", "upgrade"})


def default_user_agent() -> str:
    """`mcpkit/<installed version>`."""
    try:
        version = metadata.version("mcpkit")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        version = "0"
    return f"mcpkit/{version}"


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class GuardedClient:
    """Fetches URLs for tools through the egress guard; one per server.

    Args:
        policy: The egress policy (every public host on ports 80/443 by default).
        resolver: Name resolution (the system resolver by default).
        auth: Optional OAuth2 client credentials for one API host.
        secret: Secret lookup used by `auth` (required with it).
        base_url: Optional base; relative request paths are appended under it, never resolved.
        ssl_context: Trust roots for TLS; must verify (the system store by default).
        user_agent: Default User-Agent (`mcpkit/<version>`); an explicit header overrides it.
    """

    def __init__(
        self,
        policy: EgressPolicy | None = None,
        *,
        resolver: Resolver | None = None,
        auth: OAuth2ClientCredentials | None = None,
        secret: SecretLookup | None = None,
        base_url: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        user_agent: str | None = None,
    ) -> None:
        self.policy = policy or EgressPolicy()
        self.transport = GuardedTransport(self.policy, resolver or SystemResolver(), ssl_context=ssl_context)
        if auth is not None and secret is None:
            raise DefinitionError("GuardedClient(auth=...) needs secret=, the lookup for its secret names")
        self.auth: TokenSource | None = None if auth is None or secret is None else auth.bind(secret)
        if base_url is not None:
            canonicalise(base_url)
        self._base_url = base_url
        self._user_agent = user_agent or default_user_agent()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def register_secrets(self, redactor: Redactor) -> None:
        """Have `redactor` scrub the credentials this client obtains at run time (OAuth2 access tokens)."""
        if self.auth is not None:
            self.auth.register_secrets(redactor)

    async def aclose(self) -> None:
        """Close pooled connections."""
        await self.transport.aclose()

    async def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        path_params: Mapping[str, object] | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
        content: bytes | str | None = None,
    ) -> httpx2.Response:
        """Fetch `url` (a template when `path_params` is given) and return the read response.

        Any status is returned as is; `fetch_json` maps statuses to errors.

        Args:
            url: Absolute URL, or a path under the client's `base_url`; `{name}` placeholders
                in the path are filled from `path_params`, each encoded as one segment.
            method: HTTP method.
            path_params: Values for the URL template's placeholders.
            params: Query parameters added to the URL.
            headers: Request headers; they override the defaults (User-Agent included).
            json: A JSON body (sets Content-Type).
            content: A raw body.

        Returns:
            The response, body already read (at most `policy.max_bytes`, decoded).

        Raises:
            EgressDenied: the guard refused the URL, a redirect hop or an address.
            ToolTimeout: the whole fetch ran past `policy.timeout`.
            UpstreamError: the upstream could not be reached (retryable).
            ResponseTooLarge: the body ran past the cap.
        """
        text, guard = expand_template(url, path_params, self._base_url)
        target = canonicalise(text)
        if guard is not None:
            guard.verify(target)
        if params:
            target = canonicalise(str(target.url.copy_merge_params(params)))
        admit(target, self.policy)
        body, request_headers = self._prepare(method, headers, json, content)
        try:
            with anyio.fail_after(self.policy.timeout):
                return await self._send_with_auth(target, method.upper(), request_headers, body)
        except TimeoutError:
            raise ToolTimeout(
                f"The request to {target.host} timed out after {self.policy.timeout:g} s.", retryable=True
            ) from None

    @overload
    async def fetch_json(
        self, url: str, *, schema: None = None, error_map: ErrorMap | None = None, **kwargs: Any
    ) -> Any: ...

    @overload
    async def fetch_json(
        self, url: str, *, schema: type[T], error_map: ErrorMap | None = None, **kwargs: Any
    ) -> T: ...

    async def fetch_json(
        self, url: str, *, schema: Any = None, error_map: ErrorMap | None = None, **kwargs: Any
    ) -> Any:
        """Fetch `url` and decode its JSON; non-2xx statuses become errors.

        Args:
            url: As for `fetch`.
            schema: A pydantic model (or any type pydantic validates) for the body.
            error_map: Hook returning the upstream's own error message for a non-2xx response.
            **kwargs: As for `fetch`.

        Returns:
            The JSON value, or the validated `schema` instance.

        Raises:
            UpstreamStatusError: 4xx (not retryable, except 429), 429 and 5xx (retryable).
            BadUpstreamResponse: not JSON, or not matching `schema`.
        """
        headers = dict(kwargs.pop("headers", None) or {})
        if not any(k.lower() == "accept" for k in headers):
            headers["Accept"] = "application/json"
        response = await self.fetch(url, headers=headers, **kwargs)
        raise_for_upstream_status(response, error_map)
        return decode_json(response, schema)

    def _prepare(
        self, method: str, headers: Mapping[str, str] | None, json: Any, content: bytes | str | None
    ) -> tuple[bytes | None, httpx2.Headers]:
        merged = httpx2.Headers(
            {"user-agent": self._user_agent, "accept": "*/*", "accept-encoding": "gzip, deflate"}
        )
        for name, value in (headers or {}).items():
            if name.lower() in _FORBIDDEN_HEADERS:
                raise EgressDenied("header", f"The {name} header is set by the egress client, not by tools.")
            if not _TOKEN.fullmatch(name) or any(c in str(value) for c in "\r\n\0"):
                raise EgressDenied("header", "Header names must be tokens and values single lines.")
            merged[name] = value
        if json is not None and content is not None:
            raise DefinitionError("pass json= or content=, not both")
        body: bytes | None = None
        if json is not None:
            body = jsonlib.dumps(json, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
            merged.setdefault("content-type", "application/json")
        elif content is not None:
            body = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        if not method.isalpha():
            raise DefinitionError(f"invalid HTTP method {method!r}")
        return body, merged

    async def _send_with_auth(
        self, target: Target, method: str, headers: httpx2.Headers, body: bytes | None
    ) -> httpx2.Response:
        if self.auth is None or not self.auth.applies_to(target):
            return await self._send_following(target, method, headers, body, bearer=None)
        token = await self.auth.token(self._send_token_request)
        response = await self._send_following(target, method, headers, body, bearer=token)
        if response.status_code == 401 and self.auth.applies_to(canonicalise(str(response.request.url))):
            self.auth.invalidate(token)
            token = await self.auth.token(self._send_token_request)
            response = await self._send_following(target, method, headers, body, bearer=token)
        return response

    async def _send_following(
        self, target: Target, method: str, headers: httpx2.Headers, body: bytes | None, bearer: str | None
    ) -> httpx2.Response:
        for hops in range(self.policy.max_redirects + 1):
            send_headers = httpx2.Headers(headers)
            if bearer is not None:
                send_headers["authorization"] = f"Bearer {bearer}"
            response = await self._send_once(target, method, send_headers, body)
            location = response.headers.get("location")
            if response.status_code not in REDIRECT_STATUSES or location is None:
                return await self._read(response, target)
            await response.aclose()
            if hops == self.policy.max_redirects:
                break
            hop = next_hop(target, response.status_code, method, headers, body, location)
            admit(hop.target, self.policy)
            target, method, headers, body = hop.target, hop.method, hop.headers, hop.body
            if hop.origin_changed:
                bearer = None  # a token never follows a redirect to another origin
        raise EgressDenied(
            "redirect_limit",
            f"Too many redirects (more than {self.policy.max_redirects}) from {target.host}.",
        )

    async def _send_token_request(
        self, target: Target, headers: httpx2.Headers, body: bytes
    ) -> httpx2.Response:
        admit(target, self.policy)
        headers.setdefault("user-agent", self._user_agent)
        response = await self._send_once(target, "POST", headers, body)
        return await self._read(response, target)

    async def _send_once(
        self, target: Target, method: str, headers: httpx2.Headers, body: bytes | None
    ) -> httpx2.Response:
        timeout = self.policy.timeout
        request = httpx2.Request(
            method,
            target.url,
            headers=headers,
            content=body,
            extensions={"timeout": {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}},
        )
        try:
            response = await self.transport.handle_async_request(request)
        except httpx2.TimeoutException:
            raise ToolTimeout(f"The request to {target.host} timed out.", retryable=True) from None
        except httpx2.TransportError as exc:
            if _caused_by(exc, ssl.SSLCertVerificationError):
                raise UpstreamError(
                    f"The TLS certificate of {target.host} could not be verified.", retryable=False
                ) from None
            raise UpstreamError(f"Could not connect to {target.host}; retry later.", retryable=True) from None
        response.request = request
        return response

    async def _read(self, response: httpx2.Response, target: Target) -> httpx2.Response:
        try:
            content = await read_capped(response, self.policy.max_bytes, target.host)
        except httpx2.TimeoutException:
            raise ToolTimeout(f"Reading the response from {target.host} timed out.", retryable=True) from None
        except httpx2.TransportError:
            raise UpstreamError(
                f"The connection to {target.host} failed mid-response.", retryable=True
            ) from None
        headers = httpx2.Headers(
            [
                (k, v)
                for k, v in response.headers.multi_items()
                if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
            ]
        )
        return httpx2.Response(
            response.status_code,
            headers=headers,
            content=content,
            request=response.request,
            extensions={"http_version": response.extensions.get("http_version", b"HTTP/1.1")},
        )
