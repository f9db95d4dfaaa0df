"""Report tools: the example file on SQLite and PostgreSQL through the official client, the compiled
input schemas, binding (never interpolation), and bad files failing whole with file, line and why.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from mcpkit import Server
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.masking import MASKED, MaskPolicy, reflect_schema
from mcpkit.sql.models import QueryResult
from mcpkit.sql.reports import ReportRunner, ReportsError, build_report_tools, load_reports
from mcpkit.sql.server import build_server
from mcpkit.sql.service import SqlService
from mcpkit.testing import connect
from tests.sql_governance.conftest import CrmDb

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "reports.yaml"
SCHEMA = ROOT / "docs" / "reports.schema.json"


@pytest.fixture(params=["sqlite", "postgres"])
def service(request: pytest.FixtureRequest) -> Iterator[SqlService]:
    db: CrmDb = request.getfixturevalue("sqlite_crm" if request.param == "sqlite" else "pg_crm")
    engine = SqlEngine(db.url)
    yield SqlService(engine, max_rows=100, timeout_s=10.0)
    engine.close()


def _server(service: SqlService, reports: list[Any]) -> Server:
    base = build_server(service)
    return Server(base.name, instructions=base.instructions, tools=[*base.available_tools(), *reports])


def _file(body: str) -> str:
    return "reports:\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "  ") + "\n"


def test_example_validates_against_the_json_schema() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    example = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(example)
    bad = {"reports": [{"name": "execute_query", "description": "d", "sql": "SELECT 1", "extra": 1}]}
    messages = sorted(e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(bad))
    assert len(messages) == 2 and "'extra' was unexpected" in messages[1]
    bad_param = {"reports": [{"name": "r", "description": "d", "sql": "SELECT 1",
                              "parameters": {"p": {"type": "boolean", "minimum": 1}}}]}  # fmt: skip
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(bad_param))


@pytest.mark.anyio
async def test_example_reports_run_through_the_official_client(service: SqlService) -> None:
    reports = load_reports(EXAMPLE, service)
    assert [t.name for t in reports] == [
        "quarterly_revenue_by_region",
        "top_products",
        "units_by_year",
        "region_share",
        "large_deals",
    ]
    async with connect(_server(service, reports)) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        quarterly = await client.call_tool("quarterly_revenue_by_region", {"year": 2023, "region": "Europe"})
        top = await client.call_tool("top_products", {"top": 3})
        deals = await client.call_tool(
            "large_deals", {"product": "Pulse Phone", "min_revenue": 20000, "with_notes": True}
        )
        wrong = await client.call_tool("top_products", {"year": "2024"})
        extra = await client.call_tool("units_by_year", {"year": 2024})
    schema = listed["quarterly_revenue_by_region"].input_schema
    assert schema["required"] == ["year"] and schema["additionalProperties"] is False
    assert schema["properties"]["year"] == {
        "description": "Calendar year of the deals.",
        "maximum": 2024,
        "minimum": 2021,
        "type": "integer",
    }
    assert schema["properties"]["region"]["default"] == "All"
    assert "Europe" in schema["properties"]["region"]["enum"]
    product = listed["large_deals"].input_schema["properties"]["product"]
    assert product["pattern"] == "^(?:^[A-Za-z0-9 ]{1,60}$)$"  # the file's anchors, and the whole value
    assert listed["top_products"].output_schema == listed["execute_query"].output_schema
    q = QueryResult.model_validate(quarterly.structured_content)
    assert q.columns == ["region", "quarter", "revenue", "units"] and q.row_count == 4
    assert {r[0] for r in q.rows} == {"Europe"}
    assert QueryResult.model_validate(top.structured_content).row_count == 3
    d = QueryResult.model_validate(deals.structured_content)
    assert d.row_count > 0 and all(isinstance(r[-1], str) for r in d.rows)
    assert "| id | region |" in (deals.content[0].text if deals.content else "")
    assert wrong.is_error and (wrong.meta or {})["mcpkit/error"]["code"] == "INVALID_PARAMS"
    assert extra.is_error and (extra.meta or {})["mcpkit/error"]["code"] == "INVALID_PARAMS"


def test_values_are_bound_never_interpolated(service: SqlService) -> None:
    reports = build_report_tools(
        _file(
            """
            - name: by_name
              description: Customers with this exact name.
              parameters:
                who: {type: string, description: A name.}
              sql: SELECT id FROM customers WHERE name = :who
            """
        ),
        service,
    )
    runner = reports[0].handler
    assert isinstance(runner, ReportRunner)
    assert ":who" in runner.sql
    from mcpkit.context import Context

    ctx = Context(call_id="bind", tool="by_name", client=None, principal=None, protocol_version="2025-11-25")
    for evil in ("x' OR '1'='1", "'; DROP TABLE customers; --", "x\\' OR 1=1 --"):
        assert runner.run({"who": evil}, ctx).row_count == 0
    assert runner.run({"who": "Ada Lovelace"}, ctx).row_count >= 0
    assert service.query("SELECT count(*) FROM customers", call_id="t")[0].rows == [[40]]


def test_date_and_optional_parameters(service: SqlService) -> None:
    (tool,) = build_report_tools(
        _file(
            """
            - name: echo_day
              description: Echo a day and an optional label.
              parameters:
                day: {type: date, minimum: "2020-01-01", maximum: 2030-12-31}
                label: {type: string, required: false}
              sql: SELECT :day AS day, :label AS label
            """
        ),
        service,
    )
    schema = tool.input.model_json_schema()
    assert schema["properties"]["day"]["format"] == "date" and schema["required"] == ["day"]
    from mcpkit.context import Context

    ctx = Context(call_id="d", tool="echo_day", client=None, principal=None, protocol_version="2025-11-25")
    args = tool.input.model_validate_json('{"day": "2026-02-03"}', strict=True)
    result = tool.handler(args, ctx).structured
    assert isinstance(result, QueryResult)
    assert result.rows == [["2026-02-03", None]]


BAD = _file(
    """
    - name: good_one
      description: Fine.
      sql: SELECT year FROM sales_demo GROUP BY year
    - name: bounds
      description: Bounds upside down.
      parameters:
        n: {type: integer, minimum: 5, maximum: 1}
      sql: SELECT :n AS n
    - name: undeclared
      description: Uses a parameter nobody declared.
      sql: SELECT region FROM sales_demo WHERE year = :yr
    - name: unused
      description: Declares a parameter it never uses.
      parameters:
        year: {type: integer}
      sql: SELECT 1 AS one
    - name: positional
      description: Question-mark placeholders.
      sql: SELECT region FROM sales_demo WHERE year = ?
    - name: writes
      description: Not a query.
      sql: DELETE FROM sales_demo
    - name: typo
      description: A misspelt column.
      sql: SELECT revnue FROM sales_demo
    - name: execute_query
      description: Takes a built-in name.
      sql: SELECT 1 AS one
    - name: bad_default
      description: Default outside its enum.
      parameters:
        r: {type: string, enum: [a, b], default: c}
      sql: SELECT :r AS r
    - name: reserved_param
      description: A parameter named like a model attribute.
      parameters:
        schema: {type: string}
      sql: SELECT :schema AS s
    - name: many_rows
      description: More rows than the server allows.
      max_rows: 100000
      sql: SELECT 1 AS one
    - name: good_one
      description: Same name again.
      sql: SELECT 1 AS one
    - name: strange
      description: Unknown key.
      colour: blue
      sql: SELECT 1 AS one
    """
)


def test_a_bad_file_fails_whole_with_file_line_and_reason(service: SqlService) -> None:
    with pytest.raises(ReportsError) as caught:
        build_report_tools(BAD, service, source="bad.yaml")
    problems = caught.value.problems
    expected = [
        ("bounds", "minimum is above maximum"),
        ("undeclared", "uses :yr, which is not a declared parameter"),
        ("unused", "'year' is declared but the SQL never uses :year"),
        ("positional", "use named parameters"),
        ("writes", "read-only"),
        ("typo", "the database rejects it"),
        ("execute_query", "taken by a built-in tool"),
        ("bad_default", "default is not one of the enum values"),
        ("reserved_param", "names are lower-case letters"),
        ("many_rows", "above the server's maximum of 100"),
        ("good_one", "the name is also used on line"),
        ("strange", "unknown key 'colour'"),
    ]
    text = "\n".join(problems)
    for report, fragment in expected:
        assert any(f"report {report!r}" in line and fragment.lower() in line.lower() for line in problems), (
            report,
            text,
        )
    assert all(line.startswith("bad.yaml:") for line in problems)
    numbers = [int(line.split(":")[1]) for line in problems]
    assert numbers == sorted(numbers) and len(problems) == len(expected)
    lines = BAD.splitlines()
    for line in problems:
        number = int(line.split(":")[1])
        name = line.split("report '")[1].split("'")[0]
        assert any(name in lines[i] for i in range(max(0, number - 12), number)), line
    assert not any("good_one" in line and "also used" not in line for line in problems)


def test_syntax_errors_in_yaml_name_the_line(service: SqlService, tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("reports:\n  - name: a\n    sql: [unclosed\n", encoding="utf-8")
    with pytest.raises(ReportsError, match=r"r.yaml:4: not valid YAML"):
        load_reports(path, service)
    with pytest.raises(ReportsError, match="cannot read"):
        load_reports(tmp_path / "missing.yaml", service)
    path.write_text("tools: []\n", encoding="utf-8")
    with pytest.raises(ReportsError, match=r"r.yaml:1: the file needs a top-level `reports:` list"):
        load_reports(path, service)


def test_masking_applies_to_reports(crm: CrmDb) -> None:
    engine = SqlEngine(crm.url)
    service = SqlService(engine, max_rows=100, timeout_s=10.0)
    schema = reflect_schema(engine.sa_engine, None if crm.dialect == "sqlite" else crm.schema)
    policy = MaskPolicy.of(["customers.email", "*.ssn"])
    try:
        (tool,) = build_report_tools(
            _file(
                """
                - name: contacts
                  description: Contacts of a region.
                  parameters:
                    region: {type: string}
                  sql: SELECT name, email FROM customers WHERE region = :region ORDER BY id
                """
            ),
            service,
            schema=schema,
            policy=policy,
        )
        from mcpkit.context import Context

        ctx = Context(
            call_id="m", tool="contacts", client=None, principal=None, protocol_version="2025-11-25"
        )
        runner = tool.handler
        assert isinstance(runner, ReportRunner)
        result = runner.run({"region": "Europe"}, ctx)
        assert result.row_count > 0 and {r[1] for r in result.rows} == {MASKED}
        with pytest.raises(ReportsError, match=r"report 'probe': sql: Masked columns may only be selected"):
            build_report_tools(
                _file(
                    """
                    - name: probe
                      description: Filters on a masked column.
                      parameters:
                        prefix: {type: string, like: prefix}
                      sql: SELECT count(*) AS n FROM customers WHERE email LIKE :prefix
                    """
                ),
                service,
                schema=schema,
                policy=policy,
            )
    finally:
        engine.close()


def test_cache_and_limits_reach_the_tool(sqlite_crm: CrmDb) -> None:
    engine = SqlEngine(sqlite_crm.url)
    try:
        tools = load_reports(EXAMPLE, SqlService(engine, max_rows=100))
    finally:
        engine.close()
    by_name = {t.name: t for t in tools}
    assert by_name["units_by_year"].cache_ttl_s == 3600
    assert "Returns at most 40 rows" in by_name["quarterly_revenue_by_region"].description
    assert "revenue: Net revenue in USD" in by_name["top_products"].description
    assert by_name["top_products"].annotations is not None
    assert by_name["top_products"].annotations.read_only_hint is True


def test_report_cells_are_clipped_in_the_sql_sent(crm: CrmDb) -> None:
    # As execute_query: a report's big cells are cut by the database, so no cell over the budget
    # reaches the driver; the bound parameter still filters (the clip wraps the text with it).
    from mcpkit.context import Context
    from mcpkit.sql.clipping import CellBudget

    engine = SqlEngine(crm.url)
    service = SqlService(engine, max_rows=100, timeout_s=20.0, cells=CellBudget(call_bytes=64 * 1024))
    big = {"sqlite": "printf('%.*c', 1000000, 'x')", "postgres": "repeat('x', 1000000)"}
    big["mysql"] = "repeat('x', 1000000)"
    try:
        (tool,) = build_report_tools(
            _file(
                f"""
                - name: big_cells
                  description: A big cell per customer of a region.
                  parameters:
                    region: {{type: string}}
                  sql: >-
                    SELECT id, {big[crm.dialect]} AS big, name FROM customers
                    WHERE region = :region ORDER BY id
                """
            ),
            service,
        )
        runner = tool.handler
        assert isinstance(runner, ReportRunner) and runner.clip is not None and ":region" in runner.sql
        ctx = Context(
            call_id="c", tool="big_cells", client=None, principal=None, protocol_version="2025-11-25"
        )
        result = runner.run({"region": "Europe"}, ctx)
        assert 0 < result.row_count < 40 and result.columns == ["id", "big", "name"]
        cells = [r[1] for r in result.rows]
        assert all(isinstance(c, str) and 100 < len(c) < 70_000 for c in cells), [len(str(c)) for c in cells]
        assert all(isinstance(r[0], int) and r[2] for r in result.rows)  # numbers stay numbers
    finally:
        engine.close()
