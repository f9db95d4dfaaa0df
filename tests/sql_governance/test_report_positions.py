"""A plain report parameter is read as a value: every other position fails the load (fail closed).

Each refused report is first shown to be dangerous on the real engine: the same SQL, run by the
read-only account with a caller's wildcard, returns every customer. Then loading it must fail.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from mcpkit.sql.reports import ReportsError, build_report_tools
from mcpkit.sql.reports.bind import BindError, prepare_sql
from mcpkit.sql.reports.spec import parse_reports
from mcpkit.sql.service import SqlService

ROOT = Path(__file__).resolve().parents[2]
DIALECTS = ("sqlite", "postgres", "mysql")
ALL_CUSTOMERS = 40
REGIONS = "{Europe,North America,Asia Pacific,Latin America}"

WIDENING = [
    # (dialects, SQL with :p, a value that matches every row, what the refusal names)
    (("postgres",), "SELECT id FROM customers WHERE substring(name FROM :p) IS NOT NULL", ".", "SUBSTRING"),
    (("postgres",), "SELECT id FROM customers WHERE substring(name, :p) IS NOT NULL", ".", "SUBSTRING"),
    (
        ("mysql",),
        "SELECT id FROM customers WHERE JSON_SEARCH(JSON_ARRAY(name), 'one', :p) IS NOT NULL",
        "%",
        "JSON_SEARCH",
    ),
    (
        ("sqlite", "postgres", "mysql"),
        "WITH params(q) AS (SELECT :p) SELECT id FROM customers, params WHERE name LIKE params.q",
        "%",
        "output column of a WITH query",
    ),
    (
        ("mysql",),
        "WITH v AS (SELECT :p AS x) SELECT id FROM customers, v WHERE name REGEXP v.x",
        ".",
        "output column of a WITH query",
    ),
    (
        ("sqlite", "postgres", "mysql"),
        "SELECT c.id FROM customers c JOIN (SELECT :p AS q) v ON c.name LIKE v.q",
        "%",
        "subquery in FROM",
    ),
    (
        ("sqlite",),
        "SELECT id, :p AS q FROM customers WHERE name LIKE q",
        "%",
        "through the output column 'q'",
    ),
    (
        ("mysql",),
        "SELECT id, name, :p AS q FROM customers HAVING name LIKE q",
        "%",
        "through the output column",
    ),
    # a text PostgreSQL reads as an array: one value becomes a list
    (("postgres",), "SELECT id FROM customers WHERE region = ANY(:p)", REGIONS, "ANY(:p)"),
    (("postgres",), "SELECT id FROM customers WHERE region = ANY(CAST(:p AS TEXT[]))", REGIONS, "TEXT[]"),
]
CASES = [
    pytest.param(
        dialect, sql, value, fragment, id=f"{dialect}-{i}", marks=[pytest.mark.mysql] * (dialect == "mysql")
    )
    for i, (dialects, sql, value, fragment) in enumerate(WIDENING)
    for dialect in dialects
]


def _file(sql: str, params: str = "p: {type: string, max_length: 40}") -> str:
    return textwrap.dedent(
        f"""\
        reports:
          - name: r
            description: Customers by name.
            parameters: {{{params}}}
            sql: "{sql}"
        """
    )


@pytest.mark.parametrize(("crm_service", "sql", "value", "fragment"), CASES, indirect=["crm_service"])
def test_a_parameter_the_engine_reads_as_a_pattern_fails_the_load(
    crm_service: SqlService, sql: str, value: str, fragment: str
) -> None:
    engine = crm_service.engine
    # The danger is real: the caller's value widens the match to every row on this engine.
    rows = engine.execute(sql, {"p": value}, 100, 10.0, "probe")
    assert len(rows.rows) == ALL_CUSTOMERS, (sql, value)
    miss = "{nobody}" if value.startswith("{") else "no such name"  # an array literal for ANY
    assert len(engine.execute(sql, {"p": miss}, 100, 10.0, "probe").rows) < ALL_CUSTOMERS
    with pytest.raises(ReportsError) as caught:
        build_report_tools(_file(sql), crm_service)
    assert fragment in str(caught.value) and "'p'" in str(caught.value), str(caught.value)


def _prepare(sql: str, dialect: str, params: str = "p: {type: string}") -> str:
    specs, problems = parse_reports(_file(sql, params))
    assert not problems.items, problems.items
    return prepare_sql(specs[0].sql, dialect, specs[0].params, limit=26).send


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [
        ("postgres", "SELECT 1 AS x FROM t WHERE jsonb_path_exists(j, :p)"),
        ("postgres", "SELECT 1 AS x FROM t WHERE j @? :p"),
        ("postgres", "SELECT 1 AS x FROM t WHERE j @@ :p"),
        ("postgres", "SELECT 1 AS x FROM t WHERE jsonb_path_match(j, :p)"),
        ("postgres", "SELECT 1 AS x FROM t WHERE d @@ plainto_tsquery(:p)"),
        ("postgres", "SELECT 1 AS x FROM t WHERE d @@ phraseto_tsquery(:p)"),
        ("postgres", "SELECT regexp_match(v, :p) AS m FROM t"),
        ("postgres", "SELECT regexp_split_to_array(v, :p) AS m FROM t"),
        ("postgres", "SELECT 1 AS x FROM t WHERE textregexeq(v, :p)"),
        ("postgres", "SELECT 1 AS x FROM t WHERE j ->> :p = 'x'"),
        ("postgres", "SELECT 1 AS x FROM t WHERE my_own_match(v, :p)"),
        ("postgres", "SELECT 1 AS x FROM t WHERE v % :p"),  # pg_trgm's fuzzy match on text
        ("postgres", "SELECT 1 AS x FROM t WHERE v = ANY(string_to_array(:p, ','))"),
        ("postgres", "SELECT 1 AS x FROM t WHERE v = ANY((:p))"),
        ("postgres", "SELECT * FROM (VALUES (:p)) AS v(q)"),
        ("postgres", "SELECT x FROM t, LATERAL (SELECT :p AS q) l WHERE x = l.q"),
        ("mysql", "SELECT 1 AS x FROM t WHERE JSON_CONTAINS_PATH(j, 'one', :p)"),
        ("mysql", "SELECT JSON_EXTRACT(j, :p) AS e FROM t"),
        ("mysql", "SELECT 1 AS x FROM t WHERE FIND_IN_SET(:p, v)"),
        ("mysql", "SELECT REGEXP_SUBSTR(v, :p) AS m FROM t"),
        ("mysql", "SELECT 1 AS x FROM t WHERE v NOT REGEXP :p"),
        ("sqlite", "SELECT 1 AS x FROM t WHERE regexp(:p, v)"),
        ("sqlite", "SELECT 1 AS x FROM t WHERE glob(:p, v)"),
        ("sqlite", "SELECT 1 AS x FROM t WHERE json_extract(j, :p) = 1"),
        ("sqlite", "SELECT x FROM t WHERE v LIKE (SELECT q FROM (SELECT :p AS q) s)"),
    ],
)
def test_anything_but_a_known_value_position_fails(dialect: str, sql: str) -> None:
    with pytest.raises(BindError, match="'p'"):
        _prepare(sql, dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(
    ("sql", "params"),
    [
        (
            "SELECT v FROM t WHERE v = :p AND w <> :p AND n > :n AND n <= :n",
            "p: {type: string}, n: {type: integer}",
        ),
        (
            "SELECT v FROM t WHERE v IN (:p, 'x') AND n BETWEEN :n AND :n + 10",
            "p: {type: string}, n: {type: integer}",
        ),
        (
            "SELECT v FROM t WHERE (:p IS NULL OR v = :p) LIMIT :n OFFSET :n",
            "p: {type: string}, n: {type: integer}",
        ),
        ("SELECT v FROM t WHERE :p LIKE 'a%' AND upper(v) = upper(:p)", "p: {type: string}"),
        (
            "SELECT CASE WHEN :b THEN v ELSE NULL END AS v, :p AS label FROM t",
            "b: {type: boolean}, p: {type: string}",
        ),
        (
            "SELECT v FROM t WHERE v = COALESCE(:p, 'x') AND d >= :d ORDER BY v",
            "p: {type: string}, d: {type: date}",
        ),
        (
            "SELECT v FROM t WHERE n % :n = 0 AND v = CAST(:p AS VARCHAR(10))",
            "p: {type: string}, n: {type: integer}",
        ),
        (
            "SELECT substr(v, :n, :n) AS s FROM t WHERE n = (SELECT max(n) FROM u WHERE w = :p)",
            "p: {type: string}, n: {type: integer}",
        ),
        ("SELECT v FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.w = t.v AND u.x = :p)", "p: {type: string}"),
        (
            "SELECT v FROM t WHERE v IN (SELECT w FROM u WHERE x = :p) AND length(v) < :n",
            "p: {type: string}, n: {type: integer}",
        ),
        (
            "SELECT round(n * :x, 2) AS y FROM t WHERE replace(v, :p, '') = ''",
            "x: {type: number}, p: {type: string}",
        ),
    ],
)
def test_values_in_value_positions_load(dialect: str, sql: str, params: str) -> None:
    assert ":" in _prepare(sql, dialect, params)


def test_mariadb_exact_comparisons_load() -> None:
    sent = _prepare("SELECT v FROM t WHERE v = :p COLLATE utf8mb4_bin OR BINARY v = :p", "mysql")
    assert "COLLATE utf8mb4_bin" in sent


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(
    "path", [ROOT / "examples" / "reports.yaml", ROOT / "src" / "mcpkit" / "sql" / "demo_reports.yaml"]
)
def test_every_shipped_report_passes_the_position_check(dialect: str, path: Path) -> None:
    specs, problems = parse_reports(path.read_text(encoding="utf-8"), str(path))
    assert not problems.items and len(specs) == len(
        yaml.safe_load(path.read_text(encoding="utf-8"))["reports"]
    )
    for spec in specs:
        prepare_sql(spec.sql, dialect, spec.params, limit=26)
