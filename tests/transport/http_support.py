"""Raw HTTP helpers for the transport tests: the handshake by hand, so a test controls every header."""

from __future__ import annotations

from typing import Any

import httpx2

APP = "tests/servers/http_app.py"
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef-xyz"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
VERSION = "2025-11-25"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}

MODES = {
    "sse-stateful": [],
    "json-stateful": ["--json"],
    "sse-stateless": ["--stateless"],
    "json-stateless": ["--stateless", "--json"],
}


def call(i: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def bearer(token: str) -> dict[str, str]:
    return {**ACCEPT, "Authorization": f"Bearer {token}"}


def open_session(url: str, headers: dict[str, str]) -> httpx2.Response:
    """Initialize a session (stateful mode); the response carries `mcp-session-id` when it opened."""
    reply = httpx2.post(url, headers=headers, json=INIT, timeout=20)
    sid = reply.headers.get("mcp-session-id")
    if sid:
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        httpx2.post(
            url, headers={**headers, "mcp-session-id": sid, "mcp-protocol-version": VERSION}, json=note
        )
    return reply


def answer_text(reply: httpx2.Response) -> str:
    """The first text block of a tools/call answer, from a JSON body or an SSE stream."""
    import json

    body = reply.text
    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        body = next(line[5:] for line in body.splitlines() if line.startswith("data:") and line[5:].strip())
    return str(json.loads(body)["result"]["content"][0]["text"])


def raw_request(
    sock: Any, body: Any, headers: dict[str, str], method: str = "POST"
) -> tuple[int, dict[str, str], str]:
    """One request on an open socket, the answer read by its Content-Length (`--json` servers).

    For tests that must choose the TCP connection itself (its source port, say).
    """
    import json

    data = json.dumps(body).encode() if body is not None else b""
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall(
        f"{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}Content-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before an answer")
        buffer += chunk
    raw_head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = raw_head.decode("latin-1").split("\r\n")
    fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(fields.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return int(lines[0].split()[1]), fields, rest[:length].decode("utf-8", "replace")
