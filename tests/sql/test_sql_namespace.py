"""Servers sharing one Redis share cached answers only when they are replicas of one server.

Red team 10b B3: every `mcpkit sql serve` was named `mcpkit-sql`, and the name namespaced the Redis
keys, so two unrelated deployments with a report of the same name answered each other's rows.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import redis
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.helpers import free_port, python_server

TOKEN = "alice-token-0123456789abcdef"


@pytest.fixture
def report(redis_url: str, tmp_path: Path) -> Iterator[str]:
    name = f"mk_ns_{secrets.token_hex(4)}_names"
    (tmp_path / "reports.yaml").write_text(
        f"version: 1\nreports:\n  - name: {name}\n    title: Customer names\n"
        "    description: Every customer's name, for questions such as who our customers are.\n"
        "    sql: SELECT name FROM customers ORDER BY name\n    cache_ttl_s: 300\n",
        encoding="utf-8",
    )
    (tmp_path / "tokens").write_text(f"alice {TOKEN}\n", encoding="utf-8")
    for db, who in (("a.db", "Ann"), ("b.db", "Zed")):
        with sqlite3.connect(tmp_path / db) as c:
            c.execute("CREATE TABLE customers (name text)")
            c.execute("INSERT INTO customers VALUES (?)", [who])
    yield name
    r = redis.Redis.from_url(redis_url)
    for key in r.scan_iter(match=f"mcpkit:*:cache:{name}*"):
        r.delete(key)


async def _ask(port: int, tool: str) -> tuple[str, bool]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    url = f"http://127.0.0.1:{port}/mcp"
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        result = await client.call_tool(tool, {})
    return str(result.structured_content), bool((result.meta or {}).get("mcpkit/cached"))


def _serve(tmp_path: Path, db: str, port: int, redis_url: str, *more: str) -> list[str]:
    return [
        "-m", "mcpkit", "sql", "serve", "--dsn", f"sqlite:///{tmp_path / db}", "--no-audit",
        "--reports", str(tmp_path / "reports.yaml"), "--redis", redis_url, "--transport", "http",
        "--port", str(port), "--tokens", str(tmp_path / "tokens"), *more,
    ]  # fmt: skip


@pytest.mark.anyio
async def test_two_different_servers_never_share_cached_answers(
    report: str, tmp_path: Path, redis_url: str
) -> None:
    pa, pa2, pb = free_port(), free_port(), free_port()
    with (
        python_server(_serve(tmp_path, "a.db", pa, redis_url), pa),
        python_server(_serve(tmp_path, "a.db", pa2, redis_url), pa2),
        python_server(_serve(tmp_path, "b.db", pb, redis_url), pb),
    ):
        a = await _ask(pa, report)
        replica = await _ask(pa2, report)
        b = await _ask(pb, report)
    assert "Ann" in a[0] and not a[1]
    assert replica == (a[0], True)  # a replica (same configuration) answers from the shared cache
    assert "Zed" in b[0] and not b[1]  # another server: its own rows, never the cached ones


@pytest.mark.anyio
async def test_name_sets_the_namespace(report: str, tmp_path: Path, redis_url: str) -> None:
    """`--name`: the operator says which servers are replicas (here, wrongly, two different ones)."""
    pa, pb = free_port(), free_port()
    name = ["--name", f"mk-ns-{secrets.token_hex(4)}"]
    with (
        python_server(_serve(tmp_path, "a.db", pa, redis_url, *name), pa),
        python_server(_serve(tmp_path, "b.db", pb, redis_url, *name), pb),
    ):
        a = await _ask(pa, report)
        b = await _ask(pb, report)
    assert "Ann" in a[0] and b == (a[0], True)
