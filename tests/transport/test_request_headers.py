"""Header details a client may spell differently: Host without a port, in capitals or with a trailing dot
(and a Host whose port is not a number refused), media types in capitals;
and static tokens never reach the operator's log, even pasted into a query."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.helpers import free_port, python_server, text_of
from tests.transport.http_support import ACCEPT, APP, INIT

TOKEN = "ops-token-0123456789abcdef"


def test_loopback_host_without_a_port_and_case_insensitive_media_types() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with python_server([APP, str(port), "--json", "--stateless"], port):
        hosts = {
            host: httpx2.post(url, headers={**ACCEPT, "Host": host}, json=INIT).status_code
            for host in (
                "127.0.0.1",
                "localhost",
                "[::1]",
                f"127.0.0.1:{port}",
                "evil.example",
                "localhost.evil.example",
                "LOCALHOST",  # host names are case-insensitive
                f"LocalHost.:{port}",  # a trailing dot is the same name
                "127.0.0.1:",  # an empty port is the default one
                "127.0.0.1:evil",  # a port must be a number
                "localhost:80x",
                "[::1]x",
                "EVIL.example.",
            )
        }
        types = {
            media: httpx2.post(url, headers={**ACCEPT, "Content-Type": media}, json=INIT).status_code
            for media in (
                "APPLICATION/JSON",
                "Application/Json; charset=UTF-8",
                "application/json",
                "text/plain",
            )
        }
    assert hosts == {
        "127.0.0.1": 200,
        "localhost": 200,
        "[::1]": 200,
        f"127.0.0.1:{port}": 200,
        "evil.example": 421,
        "localhost.evil.example": 421,
        "LOCALHOST": 200,
        f"LocalHost.:{port}": 200,
        "127.0.0.1:": 200,
        "127.0.0.1:evil": 400,
        "localhost:80x": 400,
        "[::1]x": 400,
        "EVIL.example.": 421,
    }
    assert types == {
        "APPLICATION/JSON": 200,
        "Application/Json; charset=UTF-8": 200,
        "application/json": 200,
        "text/plain": 400,
    }


CAROL = "carol-tok\\en-0123456789ab"  # a backslash: `%r` doubles it
LONG = "long-" + "0123456789" * 8  # longer than the 64 characters the SDK logs of a session id


@pytest.mark.anyio
async def test_a_static_token_pasted_into_a_query_is_not_in_the_verbose_log(tmp_path: Path) -> None:
    """Not verbatim, not escaped by the `%r` of a refused query, not cut by a log line's length cap."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"ops {TOKEN}\ncarol {CAROL}\nlong {LONG}\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    args = ["-m", "mcpkit", "sql", "serve", "--demo", "--transport", "http", "--port", str(port)]
    args += ["--tokens", str(tokens), "-v"]
    straddling = "SELECT '" + "x" * (2000 - len("SELECT '") - 10) + TOKEN + "' AS cut"  # cut at 2000
    with python_server(args, port) as running:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            result = await client.call_tool("execute_query", {"query": f"SELECT '{TOKEN}' AS pasted"})
            await client.call_tool("execute_query", {"query": f"DELETE FROM t WHERE a = '{CAROL}'"})
            await client.call_tool("execute_query", {"query": straddling})
            lost = await http.post(  # the SDK logs an unknown session id (its first 64 characters)
                url,
                headers={**ACCEPT, "mcp-session-id": LONG, "mcp-protocol-version": "2025-11-25"},
                json=INIT,
            )
        log = running.log()
    assert "pasted" in text_of(result)  # answered (the result is redacted too: the token is a secret)
    assert "pasted" in log  # the query was logged ...
    assert "DELETE FROM t" in log and "x" * 1000 in log
    assert lost.status_code == 404
    assert "unknown or expired session ID" in log
    for token in (TOKEN, CAROL, LONG):  # ... without the token, whole, escaped or cut
        for spelling in (token, repr(token)[1:-1]):
            assert spelling[:12] not in log, spelling
