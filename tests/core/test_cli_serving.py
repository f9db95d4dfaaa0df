"""`mcpkit sql serve --transport http` as an operator runs it (static tokens), and its bad options."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.helpers import free_port, python_server, run_mcpkit, text_of

TOKEN = "ops-token-0123456789abcdef"


@pytest.mark.anyio
async def test_sql_server_over_http_with_tokens(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"ops {TOKEN}\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    args = [
        "-m",
        "mcpkit",
        "sql",
        "serve",
        "--demo",
        "--transport",
        "http",
        "--port",
        str(port),
        "--stateless",
        "--tokens",
        str(tokens),
    ]
    with python_server(args, port) as running:
        assert (
            httpx2.post(url, json={}, headers={"Accept": "application/json, text/event-stream"}).status_code
            == 401
        )
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            result = await client.call_tool(
                "execute_query", {"query": "SELECT COUNT(*) AS n FROM sales_demo"}
            )
        log = running.log()
    assert "| n |" in text_of(result)
    assert TOKEN not in log


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--jwt-issuer", "https://idp.test", "--jwks", "/nonexistent/jwks.json"], "JWKS file /nonexistent"),
        (["--jwt-issuer", "https://idp.test", "--jwks", "http://idp.test/jwks"], "must be https"),
        (["--jwt-issuer", "https://idp.test"], "--jwt-issuer needs --jwks"),
        (["--tokens", "/nonexistent/tokens"], "/nonexistent/tokens: No such file"),
        (["--tokens", "README.md"], "README.md:"),
    ],
)
def test_bad_serving_options_are_one_clear_line(options: list[str], message: str) -> None:
    proc = run_mcpkit("sql", "serve", "--demo", "--no-audit", "--transport", "http", *options, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
