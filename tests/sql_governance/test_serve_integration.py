"""`mcpkit sql serve --demo --mask --audit` end to end: reports, masking, refusals, every call on record."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from tests.helpers import ROOT, run_mcpkit, text_of


def _code(result: Any) -> str:
    return str((result.meta or {}).get("mcpkit/error", {}).get("code", "OK"))


@pytest.mark.anyio
async def test_demo_session_is_masked_reported_and_audited(tmp_path: Path) -> None:
    audit = tmp_path / "audit.db"
    args = [
        "-m",
        "mcpkit",
        "sql",
        "serve",
        "--demo",
        "--mask",
        str(ROOT / "examples" / "masks.yaml"),
        "--audit",
        str(audit),
    ]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))
    calls: list[tuple[str, dict[str, Any]]] = [
        ("quarterly_revenue_by_region", {"year": 2023}),
        ("execute_query", {"query": "SELECT id, notes FROM sales_demo ORDER BY id", "max_rows": 3}),
        ("execute_query", {"query": "SELECT id FROM sales_demo WHERE notes LIKE 'a%'"}),
        ("execute_query", {"query": "DELETE FROM sales_demo"}),
        ("execute_query", {"query": 42}),
        ("list_tables", {}),
    ]
    results = []
    async with Client(params, mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        for name, arguments in calls:
            results.append(await client.call_tool(name, arguments))
    assert {"execute_query", "quarterly_revenue_by_region", "top_products"} <= names
    report, masked, filtered, write, invalid, tables = results
    assert _code(report) == "OK"
    assert "| region | quarter | revenue | units |" in text_of(report)
    assert [row[1] for row in masked.structured_content["rows"]] == ["<masked>"] * 3  # type: ignore[index]
    assert _code(filtered) == "REFUSED"
    assert _code(write) == "REFUSED"
    assert _code(invalid) == "INVALID_PARAMS"
    assert _code(tables) == "OK"

    done = run_mcpkit("audit", "--audit", str(audit), "--format", "json")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    records = {r["call_id"]: r for r in map(json.loads, out.splitlines())}
    for (name, _), result in zip(calls, results, strict=True):
        record = records[result.meta["mcpkit/callId"]]  # type: ignore[index]
        assert record["tool"] == name
        assert record["outcome"] == _code(result)
    sent = records[masked.meta["mcpkit/callId"]]  # type: ignore[index]
    assert "LIMIT 4" in sent["sql"]  # the SQL actually sent, with the cap
    assert sent["rows"] == 3
    assert sent["truncated"] is True
    assert records[filtered.meta["mcpkit/callId"]]["reason"]  # type: ignore[index]  # why it was refused
