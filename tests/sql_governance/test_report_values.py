"""What a report binds is what its published inputSchema allows, on every engine.

Calls go as raw JSON-RPC lines to `mcpkit sql serve --reports` over stdio, because the official
client cannot send what the red team sent: `NaN`, `Infinity`, integers past 2^63.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.reports import ReportsError, build_report_tools
from mcpkit.sql.reports.spec import INT_MAX, INT_MIN
from mcpkit.sql.service import SqlService
from tests.helpers import ROOT
from tests.sql_governance.conftest import CRM_FIXTURES, CRM_PARAMS, CrmDb


class RawStdio:
    """One `mcpkit sql serve` subprocess spoken to in raw JSON-RPC lines."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpkit", *args],
            cwd=str(ROOT),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.next_id = 0
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        }
        assert "result" in self.request("initialize", json.dumps(init))
        self._send('{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: str) -> dict[str, Any]:
        """Send one request whose params are raw JSON text; its response."""
        self.next_id += 1
        self._send(f'{{"jsonrpc":"2.0","id":{self.next_id},"method":"{method}","params":{params}}}')
        assert self.proc.stdout is not None
        while True:
            ready, _, _ = select.select([self.proc.stdout], [], [], 30)
            assert ready, "no answer from the server"
            line = self.proc.stdout.readline()
            assert line, "the server closed its output"
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == self.next_id:
                return message

    def call(self, tool: str, arguments: str) -> tuple[str, str]:
        """(error code or OK, text) of one tools/call with raw JSON arguments."""
        result = self.request("tools/call", f'{{"name":"{tool}","arguments":{arguments}}}')["result"]
        code = (result.get("_meta") or {}).get("mcpkit/error", {}).get("code", "OK")
        return str(code), result["content"][0]["text"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(20)


REPORTS = textwrap.dedent(
    """
    reports:
      - name: by_amount
        description: Customers by tier and id, unbounded number and integer.
        parameters:
          amt: {type: number}
          big: {type: integer}
        sql: SELECT count(*) AS n FROM customers WHERE tier >= :amt AND id < :big
      - name: by_flag
        description: Customers above a tier given as an integer enum.
        parameters:
          k: {type: integer, enum: [0, 1]}
        sql: SELECT count(*) AS n FROM customers WHERE tier > :k
      - name: by_share
        description: Customers above a tier given as a number enum.
        parameters:
          k: {type: number, enum: [1, 2.5]}
        sql: SELECT count(*) AS n FROM customers WHERE tier > :k
    """
)


@pytest.fixture(params=CRM_PARAMS)
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RawStdio]:
    db: CrmDb = request.getfixturevalue(CRM_FIXTURES[request.param])
    reports = tmp_path / "reports.yaml"
    reports.write_text(REPORTS, encoding="utf-8")
    raw = RawStdio(["sql", "serve", "--dsn", db.url, "--reports", str(reports), "--no-audit"])
    yield raw
    raw.close()


def test_only_what_the_schema_publishes_is_bound(served: RawStdio) -> None:
    tools = {t["name"]: t for t in served.request("tools/list", "{}")["result"]["tools"]}
    big = tools["by_amount"]["inputSchema"]["properties"]["big"]
    assert (big["minimum"], big["maximum"]) == (INT_MIN, INT_MAX) == (-(2**63), 2**63 - 1)
    assert served.call("by_amount", '{"amt": 1, "big": 5}')[0] == "OK"
    # Non-finite numbers: Python's JSON reader takes them, JSON Schema has none.
    for amt in ("NaN", "Infinity", "-Infinity", "1e999", "1" + "0" * 400):
        code, text = served.call("by_amount", f'{{"amt": {amt}, "big": 5}}')
        assert (code, "finite number" in text) == ("INVALID_PARAMS", True), (amt, text)
    # Integers past the 64-bit range are a validation error with a sentence, never INTERNAL.
    for value in (2**63, -(2**63) - 1, 10**400):
        code, text = served.call("by_amount", f'{{"amt": 1, "big": {value}}}')
        assert code == "INVALID_PARAMS" and "than or equal to" in text, (value, code, text)
    for value in (2**63 - 1, -(2**63)):
        assert served.call("by_amount", f'{{"amt": 1, "big": {value}}}')[0] == "OK", value
    # A JSON boolean is no integer or number, whatever enum is declared.
    for tool, ok in (("by_flag", "1"), ("by_share", "2.5")):
        assert served.call(tool, f'{{"k": {ok}}}')[0] == "OK"
        for flag in ("true", "false"):
            code, text = served.call(tool, f'{{"k": {flag}}}')
            assert (code, "not true or false" in text) == ("INVALID_PARAMS", True), (tool, flag, text)


@pytest.fixture
def sqlite_service(sqlite_crm: CrmDb) -> Iterator[SqlService]:
    engine = SqlEngine(sqlite_crm.url)
    yield SqlService(engine, max_rows=100, timeout_s=5.0)
    engine.close()


def _file(params: str, sql: str = "SELECT :x AS x") -> str:
    return f"reports:\n  - name: r\n    description: d\n    parameters: {{{params}}}\n    sql: {sql}\n"


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ("x: {type: integer, maximum: 9223372036854775808}", "maximum must lie between"),
        ("x: {type: integer, minimum: -9223372036854775809}", "minimum must lie between"),
        ("x: {type: integer, enum: [1, 18446744073709551616]}", "enum must lie between"),
        ("x: {type: integer, default: 9223372036854775808}", "default must lie between"),
    ],
)
def test_integer_limits_outside_64_bits_fail_the_load(
    sqlite_service: SqlService, params: str, fragment: str
) -> None:
    with pytest.raises(ReportsError, match=fragment):
        build_report_tools(_file(params), sqlite_service)


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ('s: {type: string, max_length: 3, default: "abcdefgh"}', "default is longer than max_length (8 > 3"),
        (
            'p: {type: string, like: prefix, max_length: 2, default: "%%%%%"}',
            "default is longer than max_length",
        ),
        ("x: {type: number, minimum: 0, maximum: 10, default: .nan}", "default must be a finite number"),
        ("x: {type: number, default: .inf}", "default must be a finite number"),
        ("x: {type: number, default: -.inf}", "default must be a finite number"),
        ("x: {type: number, minimum: .nan}", "minimum must be a finite number"),
        ("x: {type: number, enum: [1, .nan]}", "enum must be a finite number"),
    ],
)
def test_a_default_breaking_its_own_rules_fails_the_load(
    sqlite_service: SqlService, params: str, fragment: str
) -> None:
    name = params.split(":")[0]
    sql = f"SELECT id FROM customers WHERE name LIKE :{name}" if "like:" in params else f"SELECT :{name} AS v"
    with pytest.raises(ReportsError) as caught:
        build_report_tools(_file(params, sql), sqlite_service)
    assert fragment in str(caught.value), str(caught.value)


def test_defaults_that_keep_their_rules_load_and_are_bound(sqlite_service: SqlService) -> None:
    from mcpkit.context import Context

    (tool,) = build_report_tools(
        _file(
            "n: {type: number, minimum: 0, maximum: 10, default: 3}, "
            's: {type: string, max_length: 3, default: "abc"}, '
            'd: {type: date, minimum: "2020-01-01", default: "2024-02-29"}, '
            "k: {type: integer, enum: [0, 1], default: 1}",
            "SELECT :n AS n, :s AS s, :d AS d, :k AS k",
        ),
        sqlite_service,
    )
    ctx = Context(call_id="d", tool="r", client=None, principal=None, protocol_version="2025-11-25")
    args = tool.input.model_validate_json("{}", strict=True)
    assert tool.handler(args, ctx).structured.rows == [[3, "abc", "2024-02-29", 1]]


OPTIONAL = textwrap.dedent(
    """
    reports:
      - name: customers
        description: Customers, optionally by name, tier and region flag.
        parameters:
          who: {type: string, required: false}
          tier: {type: integer, required: false}
          europe: {type: boolean, required: false}
        sql: >-
          SELECT count(*) AS n FROM customers
          WHERE (:who IS NULL OR name = :who) AND (:tier IS NULL OR tier = :tier)
          AND (:europe IS NULL OR (region = 'Europe') = :europe)
      - name: by_tier_text
        description: Customers of a tier given as text.
        parameters:
          tier_text: {type: string, default: "2"}
        sql: SELECT count(*) AS n FROM customers WHERE tier = :tier_text
      - name: orders
        description: Orders, optionally from an amount on.
        parameters:
          least: {type: number, required: false}
        sql: SELECT count(*) AS n FROM orders WHERE :least IS NULL OR amount >= :least
    """
)


def test_an_omitted_optional_parameter_is_a_typed_null_on_every_engine(crm_service: SqlService) -> None:
    from mcpkit.context import Context
    from mcpkit.sql.reports import ReportRunner

    tools = {t.name: t for t in build_report_tools(OPTIONAL, crm_service)}
    ctx = Context(call_id="o", tool="customers", client=None, principal=None, protocol_version="2025-11-25")

    def count(tool: str, **values: Any) -> int:
        runner = tools[tool].handler
        assert isinstance(runner, ReportRunner)
        args = tools[tool].input.model_validate_json(json.dumps(values), strict=True)
        rows = runner.run({n: getattr(args, n) for n in type(args).model_fields}, ctx).rows
        return int(rows[0][0])

    everyone = count("customers")
    assert everyone == 40
    name = crm_service.query("SELECT name FROM customers WHERE id = 7", call_id="t")[0].rows[0][0]
    assert 1 <= count("customers", who=name) < everyone
    assert count("customers", who="nobody at all") == 0
    by_tier = [count("customers", tier=t) for t in (1, 2, 3)]
    assert sum(by_tier) == everyone and all(by_tier)
    # a string compared with an integer column is still typed by its context, not cast to text
    assert count("by_tier_text", tier_text="2") == by_tier[1]
    europe = count("customers", europe=True)
    assert 0 < europe < everyone and europe + count("customers", europe=False) == everyone
    assert count("orders") == 120 and 0 < count("orders", least=250.5) < 120


@pytest.mark.parametrize("dialect", ["postgres"])
def test_a_null_test_the_declared_type_cannot_serve_fails_the_load(dialect: str, pg_crm: CrmDb) -> None:
    engine = SqlEngine(pg_crm.url)
    try:
        with pytest.raises(
            ReportsError, match=r"the database rejects it: operator does not exist: bytea = text"
        ):
            build_report_tools(
                _file(
                    "b: {type: string, required: false}",
                    "SELECT count(*) AS n FROM customers WHERE :b IS NULL OR CAST(name AS bytea) = :b",
                ),
                SqlService(engine, max_rows=100, timeout_s=10.0),
            )
    finally:
        engine.close()
