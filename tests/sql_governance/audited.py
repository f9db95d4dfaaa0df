"""The SQL server with the audit log wired in, the way the server integration will do it.

`execute_query` notes the SQL actually sent and the rows; every tool notes who called and why an
error ended the call. Run as a module it serves stdio (for the SIGTERM test):

    python -m tests.sql_governance.audited --dsn sqlite:///demo.db --audit audit.db --pid-file pid
"""

from __future__ import annotations

import argparse
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from mcpkit import Context, Server, Tool, ToolResult
from mcpkit.definition import Handler
from mcpkit.sql.audit import AuditLog, CallAudit, open_store
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.render import render_markdown
from mcpkit.sql.server import build_server
from mcpkit.sql.service import SqlService
from mcpkit.sql.shaping import shape_rows


def _execute(service: SqlService, calls: CallAudit) -> Handler:
    def handler(args: Any, ctx: Context) -> ToolResult:
        with calls.noting(ctx):
            rows = max(1, min(args.max_rows, service.max_rows))
            admitted = service.admit(args.query, rows)
            calls.note(ctx.call_id, sql=admitted.sql)
            raw = service.engine.execute(admitted.sql, None, rows, service.timeout_s, ctx.call_id)
            result = shape_rows(raw)
            calls.note(ctx.call_id, rows=result.row_count, truncated=result.truncated)
            return ToolResult(text=render_markdown(result), structured=result)

    return handler


def _noting(tool: Tool, calls: CallAudit) -> Handler:
    inner = tool.handler

    def handler(args: Any, ctx: Context) -> Any:
        with calls.noting(ctx):
            return inner(args, ctx)

    return handler


def audited_server(service: SqlService, calls: CallAudit) -> Server:
    """`build_server(service)` with every tool noting into `calls`."""
    base = build_server(service)
    tools = [
        replace(t, handler=_execute(service, calls) if t.name == "execute_query" else _noting(t, calls))
        for t in base.available_tools()
    ]
    return Server(base.name, version=base.version, instructions=base.instructions, tools=tools)


def main() -> None:
    """Serve stdio with the audit log; records stay queued (`--linger`) until shutdown flushes them."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--audit", required=True)
    parser.add_argument("--pid-file", required=True)
    parser.add_argument("--linger", type=float, default=60.0, help="hold records this long before writing")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    audit = AuditLog(open_store(path=args.audit), linger_s=args.linger, batch=10_000)
    audit.install_signal_handlers()
    calls = CallAudit(audit)
    calls.attach()
    engine = SqlEngine(args.dsn)
    server = audited_server(SqlService(engine, max_rows=100, timeout_s=5.0), calls)
    Path(args.pid_file).write_text(str(os.getpid()), encoding="utf-8")
    try:
        server.run_stdio()
    finally:
        engine.close()
        audit.close()


if __name__ == "__main__":
    main()
