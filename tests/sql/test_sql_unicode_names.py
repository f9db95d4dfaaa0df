"""PostgreSQL names spelled with Unicode escapes are refused (red team rtg N3).

`U&"d\\0061ta"` is one name to PostgreSQL (`data`); sqlglot reads `U & "d\\0061ta"`, a bitwise AND
of two other columns, so the analysis (masks included) would judge a query the database does not
run. Admission's lexical pass refuses the form before parsing, through the server like any call.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from tests.helpers import ROOT, text_of
from tests.sql.sql_support import UNBOUNDED_MEMORY, pg_customers, pg_scratch

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]


def _refusal(result: Any) -> tuple[str, str]:
    error = (result.meta or {}).get("mcpkit/error", {})
    return str(error.get("code")), str((error.get("data") or {}).get("reason"))


async def test_unicode_escaped_names_are_refused_through_the_server(pg_url: str, tmp_path: Path) -> None:
    with pg_scratch(pg_url, "fixjuni") as db:
        pg_customers(db)
        masks = tmp_path / "masks.yaml"
        masks.write_text("masks:\n  - customers.email\n", encoding="utf-8")
        args = ["-m", "mcpkit", "sql", "serve", "--dsn", db.reader_url, "--mask", str(masks), "--no-audit"]
        args += [*UNBOUNDED_MEMORY, "--allow", "clustered-order:customers"]
        params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT), env=dict(os.environ))
        async with Client(params, mode="legacy") as client:

            async def ask(sql: str) -> Any:
                return await client.call_tool("execute_query", {"query": sql})

            assert not (await ask("SELECT name FROM customers ORDER BY id LIMIT 1")).is_error
            for sql in (
                'SELECT U&"n\\0061me" FROM customers',  # a readable column: refused all the same
                "SELECT id FROM customers WHERE U&\"em\\0061il\" LIKE 'a%'",
                "SELECT id FROM u&\"cust!006fmers\" UESCAPE '!'",
            ):
                refused = await ask(sql)
                assert _refusal(refused) == ("REFUSED", "unicode_identifier"), (sql, text_of(refused))
                assert "Unicode escapes" in text_of(refused) and "customers" not in text_of(refused)
            # the Unicode-escaped string literal was already refused (`string_literal`)
            assert _refusal(await ask("SELECT U&'\\0041' AS a")) == ("REFUSED", "string_literal")
            assert not (await ask('SELECT "name" FROM customers LIMIT 1')).is_error
