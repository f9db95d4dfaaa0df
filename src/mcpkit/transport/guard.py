"""The first ASGI layer of the HTTP server: requests every later layer can read the same way.

Before authentication and the SDK see a request, it is refused when a header that must appear
once appears twice (400: Starlette, the auth backend and the SDK read the first copy, code that
builds a dict reads the last, so two copies let a client be two callers at once); while the
server drains, new MCP requests get 503; the `Content-Type` media type is lower-cased (media types
are case-insensitive, RFC 9110 8.3.1, and the SDK compares them exactly). It also counts the MCP
calls in flight, so a draining server knows when the last one has answered.

The body is read later, by `BodyReader`, which sits behind authentication and the per-caller
gate: a request with a wrong token is refused (401) before a byte of its body is buffered, and
one caller buffers at most as many bodies as it may have requests in flight; the bytes of all
bodies still arriving are capped too (503 beyond), for the many connections of callers without
auth. There a body must arrive within `body_timeout_s` (408) and fit `max_body_bytes` (413).
`NaN` and `Infinity`, which are not JSON (RFC 8259 6) but which the SDK's parser accepts, are
refused, and so are numbers too large for a double (`1e999` parses as infinity). The SDK's answer
to a body that is not a JSON-RPC message (a validation dump of class names, links and the
caller's input) becomes one short sentence, the detail going to the operator's log.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "BODY_STATE_KEY",
    "CONNECTION_STATE_KEY",
    "PEER_STATE_KEY",
    "SERVER_INSTANCE",
    "SINGLE_HEADERS",
    "BodyReader",
    "RequestGuard",
    "ServingState",
    "peek_small_body",
    "refuse",
    "sends_only_cancellations",
]

PEER_STATE_KEY = "mcpkit_peer"
"""Where the guard leaves the TCP peer (host, port) before any proxy-header rewrite of `client`."""
CONNECTION_STATE_KEY = "mcpkit_connection"
"""Where `runner.timed_h11` leaves the id of the request's connection (unique, never reused)."""
SERVER_INSTANCE = os.urandom(6).hex()
"""This process's random id: connection ids of two replicas (or two runs) never meet."""

BODY_STATE_KEY = "mcpkit_body"
"""Where `peek_small_body` leaves a small POST body's messages for the gate's decision at the limit."""

_MAX_CANCEL_BODY = 4096
_PEEK_TIMEOUT_S = 5.0

_PORT = re.compile(rb"[0-9]{0,5}")
log = logging.getLogger("mcpkit.http")

SINGLE_HEADERS = frozenset(
    {
        b"authorization",
        b"mcp-session-id",
        b"mcp-protocol-version",
        b"content-type",
        b"content-length",
        b"host",
        b"origin",
        b"last-event-id",
    }
)
"""Headers a request may carry at most once (each names one value, RFC 9110 5.3)."""


@dataclass
class ServingState:
    """Shared by the guard, the readiness probe and the shutdown hook.

    Attributes:
        draining: Set on SIGTERM/SIGINT: readiness fails, new MCP requests get 503.
        in_flight: MCP requests (POST/DELETE) being answered; open GET streams are not counted.
        on_quiet: Called once draining and no request is in flight (ends the GET streams).
    """

    draining: bool = False
    in_flight: int = 0
    on_quiet: list[Callable[[], None]] = field(default_factory=list)

    def start_draining(self) -> None:
        """Refuse new work from now on; once the calls in flight answer, run `on_quiet`."""
        self.draining = True
        self._maybe_quiet()

    def _maybe_quiet(self) -> None:
        if self.draining and self.in_flight == 0:
            for callback in self.on_quiet:
                callback()


class RequestGuard:
    """The outermost ASGI middleware (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        state: ServingState,
        path: str,
    ) -> None:
        self.app = app
        self.state = state
        self.path = path.rstrip("/") or "/"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        repeated = _repeated(scope["headers"])
        if repeated is not None:
            await refuse(send, 400, f"The {repeated} header must appear only once.")
            return
        scope.setdefault("state", {})[PEER_STATE_KEY] = scope.get("client")
        headers = _normal_host(scope["headers"])
        if headers is None:
            await refuse(send, 400, "The Host header is not a valid host[:port].")
            return
        scope = {**scope, "headers": headers}
        if scope["path"].rstrip("/") != self.path:
            await self.app(scope, receive, send)
            return
        if self.state.draining:
            await refuse(send, 503, "The server is shutting down; retry on another replica.", retry_after=1)
            return
        scope = _lower_media_type(scope)
        if scope["method"] == "GET":  # a standing stream, not a call: not counted
            await self.app(scope, receive, send)
            return
        # Counted from the moment the request arrives, not once its body is read: a drain that
        # began while the only call was still sending its body would otherwise see nothing in
        # flight and end the SSE answers at once (200 with an empty stream).
        self.state.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.state.in_flight -= 1
            self.state._maybe_quiet()


class BodyReader:
    """Reads a POST's body behind authentication and the gate (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        body_timeout_s: float,
        max_arriving_bytes: int | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s
        self.max_arriving_bytes = max_arriving_bytes
        self.arriving = 0
        """Bytes held of bodies still arriving, all requests together (bounded by `max_arriving_bytes`)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        messages = await self._read_body(receive, send)
        if messages is None:
            return
        if _has_non_finite(b"".join(m.get("body", b"") for m in messages)):
            await refuse(send, 400, "Numbers must be finite JSON numbers (no NaN or Infinity).", code=-32700)
            return
        await self.app(scope, _replay(messages, receive), _short_errors(send))

    async def _read_body(self, receive: Receive, send: Send) -> list[Message] | None:
        """The request's body messages, or None once a 408/413/503 has been sent."""
        messages: list[Message] = []
        size = 0
        try:
            with anyio.move_on_after(self.body_timeout_s):
                while True:
                    message = await receive()
                    messages.append(message)
                    if message["type"] != "http.request":
                        return messages
                    chunk = len(message.get("body", b""))
                    size += chunk
                    self.arriving += chunk
                    if size > self.max_body_bytes:
                        await refuse(send, 413, "The request body is too large.")
                        return None
                    if not message.get("more_body", False):
                        return messages
                    if self.max_arriving_bytes is not None and self.arriving > self.max_arriving_bytes:
                        # many slow bodies at once (many connections without auth): shed this one
                        await refuse(
                            send, 503, "The server is receiving too many request bodies.", retry_after=1
                        )
                        return None
            await refuse(send, 408, f"The request body did not arrive within {self.body_timeout_s:g} s.")
            return None
        finally:
            self.arriving -= size


_NON_FINITE = re.compile(rb"NaN|Infinity|[eE]\+?[0-9]{3}")


def _has_non_finite(body: bytes) -> bool:
    """Whether `body` has NaN/Infinity as a value, or a number too large for a float (`1e999`,
    which parsers turn into infinity). Parsed only when such a word or exponent appears at all."""
    if not _NON_FINITE.search(body):
        return False

    def refuse_constant(name: str) -> Any:
        raise _NonFinite(name)

    def finite_float(text: str) -> float:
        value = float(text)
        if math.isinf(value):
            raise _NonFinite(text)
        return value

    try:
        json.loads(body, parse_constant=refuse_constant, parse_float=finite_float)
    except _NonFinite:
        return True
    except ValueError:  # not JSON at all: the SDK answers that
        return False
    return False


class _NonFinite(Exception):
    pass


_SHORT_ERRORS = (
    ("Validation error", "The request is not a valid JSON-RPC message."),
    ("Parse error", "The request body is not valid JSON."),
)


def _short_errors(send: Send) -> Send:
    """`send`, with the SDK's 400 answers to a malformed body cut to one sentence (detail logged)."""
    held: list[Message] = []

    async def short_send(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] == 400:
            held.append(message)
            return
        if held and message["type"] == "http.response.body":
            start = held.pop()
            body = message.get("body", b"")
            if not message.get("more_body", False):
                body = _shorten(body)
            headers = [(n, v) for n, v in start.get("headers", []) if n.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            message = {**message, "body": body}
        await send(message)

    return short_send


def _shorten(body: bytes) -> bytes:
    try:
        answer = json.loads(body)
        text = answer["error"]["message"]
    except (ValueError, TypeError, KeyError):
        return body
    for prefix, sentence in _SHORT_ERRORS:
        if isinstance(text, str) and text.startswith(prefix):
            log.info("refused a malformed request body: %s", text[:2000])
            answer["error"] = {**answer["error"], "message": sentence}
            answer["error"].pop("data", None)
            return json.dumps(answer).encode()
    return body


def _repeated(headers: list[tuple[bytes, bytes]]) -> str | None:
    seen: set[bytes] = set()
    for name, _ in headers:
        if name in SINGLE_HEADERS:
            if name in seen:
                return name.decode("latin-1").title()
            seen.add(name)
    return None


def _normal_host(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]] | None:
    """The headers with Host in its one spelling (lower case, no trailing dot), or None if malformed.

    Host names are case-insensitive and `name.` is the same name as `name` (RFC 9110 4.2.3,
    RFC 1034 3.1), but the SDK's DNS-rebinding check compares strings exactly; and a port that is
    not a number makes the value no host at all (RFC 3986 3.2.3), whatever the check would match.
    """
    for i, (name, value) in enumerate(headers):
        if name != b"host":
            continue
        if value.startswith(b"["):
            end = value.find(b"]")
            if end < 0:
                return None
            hostname, rest = value[: end + 1], value[end + 1 :]
            if rest and not rest.startswith(b":"):
                return None
            port = rest[1:] if rest else None
        else:
            hostname, sep, tail = value.partition(b":")
            port = tail if sep else None
        if port is not None and not _PORT.fullmatch(port):
            return None
        if port == b"":  # `host:` is `host` (RFC 3986 3.2.3: an empty port is the default one)
            port = None
        hostname = hostname.lower()
        if hostname.endswith(b".") and not hostname.endswith(b".."):
            hostname = hostname[:-1]
        if not hostname:
            return None
        normal = hostname + (b":" + port if port is not None else b"")
        if normal == value:
            return headers
        fixed = list(headers)
        fixed[i] = (name, normal)
        return fixed
    return headers


def _lower_media_type(scope: Scope) -> Scope:
    headers = scope["headers"]
    for i, (name, value) in enumerate(headers):
        if name == b"content-type":
            media, sep, params = value.partition(b";")
            lowered = media.strip().lower()
            if lowered != media:
                headers = list(headers)
                headers[i] = (name, lowered + sep + params)
                return {**scope, "headers": headers}
            break
    return scope


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


async def peek_small_body(scope: Scope, receive: Receive, limit: int = _MAX_CANCEL_BODY) -> Receive:
    """Read a POST's body into `scope["state"][BODY_STATE_KEY]` if it is at most `limit` bytes
    (and arrives within a few seconds); the `receive` that replays what was read.

    For a decision the gate takes before the body reader runs (is this only a cancellation?): a
    larger or slower body stops being read at once, and the rest is left to the body reader.
    """
    messages: list[Message] = []
    size = 0
    with anyio.move_on_after(_PEEK_TIMEOUT_S):
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > limit:
                break
            if not message.get("more_body", False):
                scope.setdefault("state", {})[BODY_STATE_KEY] = messages
                break
    return _replay(messages, receive)


def sends_only_cancellations(scope: Scope) -> bool:
    """Whether a POST's body is only `notifications/cancelled` (one, or a batch of them).

    Such a request starts no work and ends some: the per-caller gate lets it through at the limit,
    or a caller whose calls fill its slots could never cancel one.
    """
    messages = (scope.get("state") or {}).get(BODY_STATE_KEY) or ()
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
    if len(body) > _MAX_CANCEL_BODY or b"notifications/cancelled" not in body:
        return False
    try:
        parsed = json.loads(body)
    except ValueError:
        return False
    items = parsed if isinstance(parsed, list) and parsed else [parsed]
    return all(
        isinstance(m, dict) and m.get("method") == "notifications/cancelled" and "id" not in m for m in items
    )


async def refuse(
    send: Send, status: int, message: str, *, retry_after: int | None = None, code: int = -32000
) -> None:
    """Answer with `status` and a JSON-RPC error body (no request id), closing the connection."""
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
