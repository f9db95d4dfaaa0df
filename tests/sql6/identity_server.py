"""The SQL server over Streamable HTTP with bearer tokens and a role map, as the integration will wire it.

python -m tests.sql6.identity_server PORT --dsn URL --roles roles.yaml --tokens tokens
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from mcpkit import Context, Server, ToolResult
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.identities import IdentityRouter, RoleMap
from mcpkit.sql.server import build_server
from mcpkit.sql.service import SqlService
from mcpkit.transport.auth import HttpAuth, StaticTokens


def identity_server(router: IdentityRouter) -> Server:
    """`build_server` whose execute_query runs as the caller's role."""
    base = build_server(router.template)

    def execute_query(args: Any, ctx: Context) -> ToolResult:
        result, text = router.for_context(ctx).query(args.query, call_id=ctx.call_id, max_rows=args.max_rows)
        return ToolResult(text=text, structured=result)

    tools = [
        replace(t, handler=execute_query) if t.name == "execute_query" else t for t in base.available_tools()
    ]
    return Server(base.name, instructions=base.instructions, tools=tools)


def main() -> None:
    """Serve until SIGTERM."""
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--roles", required=True)
    parser.add_argument("--tokens", required=True)
    args = parser.parse_args()
    resource = f"http://127.0.0.1:{args.port}/mcp"
    engine = SqlEngine(args.dsn)
    router = IdentityRouter(SqlService(engine, timeout_s=5.0), RoleMap.from_yaml(args.roles))
    auth = HttpAuth(StaticTokens.from_file(args.tokens, resource), resource)
    try:
        identity_server(router).run_http("127.0.0.1", args.port, auth=auth)
    finally:
        router.close()
        engine.close()


if __name__ == "__main__":
    main()
