"""An ASGI gate before the MCP endpoint: refuse new work while draining, cap each client's concurrency."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["ClientGate", "ServingState"]


@dataclass
class ServingState:
    """Shared between the gate, the readiness probe and the shutdown hook."""

    draining: bool = False
    in_flight: int = 0


class ClientGate:
    """Counts requests in flight per client: its MCP session, else its token, else its connection.

    Over `max_concurrent` the request gets 429 with `Retry-After: 1`; once the server is draining,
    new requests to the MCP endpoint get 503 (calls already running finish).
    """

    def __init__(self, app: ASGIApp, *, state: ServingState, path: str, max_concurrent: int) -> None:
        self.app = app
        self.state = state
        self.path = path.rstrip("/") or "/"
        self.max_concurrent = max_concurrent
        self._per_client: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != self.path:
            await self.app(scope, receive, send)
            return
        if self.state.draining:
            await _refuse(send, 503, "The server is shutting down; retry on another replica.", retry_after=1)
            return
        key = _client_key(scope)
        if self._per_client[key] >= self.max_concurrent:
            await _refuse(send, 429, "Too many concurrent requests from this client.", retry_after=1)
            return
        self._per_client[key] += 1
        self.state.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.state.in_flight -= 1
            self._per_client[key] -= 1
            if not self._per_client[key]:
                del self._per_client[key]


def _client_key(scope: Scope) -> str:
    headers: dict[bytes, bytes] = dict(scope.get("headers") or [])
    session = headers.get(b"mcp-session-id")
    if session:
        return "s:" + session.decode("latin-1")[:128]
    authorization = headers.get(b"authorization")
    if authorization:  # keyed by a digest: the token itself is never kept
        return "t:" + hashlib.sha256(authorization).hexdigest()[:32]
    client = scope.get("client")  # else the TCP connection (never the address: a proxy shares it)
    return f"c:{client[0]}:{client[1]}" if client else "c:unknown"


async def _refuse(send: Send, status: int, message: str, *, retry_after: int) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(retry_after).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
