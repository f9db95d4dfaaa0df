"""What `=`, LIKE and the exact forms match on each engine, as docs/reports.md says.

MariaDB compares strings in the column's collation: its default for utf8mb4, utf8mb4_general_ci,
ignores case and accents and (PAD SPACE) trailing spaces, so `name = :p` with `alpha` also matches
`Ålpha`, `ALPHA`, `älpha` and `alpha `. `BINARY name = :p` and `COLLATE utf8mb4_nopad_bin` compare
exactly; `utf8mb4_bin` still ignores trailing spaces. PostgreSQL and SQLite compare exactly.
"""

from __future__ import annotations

import secrets as tokens
import sqlite3
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.context import Context
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.reports import ReportRunner, build_report_tools
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import mysql_admin, pg_admin
from tests.sql_governance.conftest import CrmDb

VALUES = ("alpha", "Ålpha", "ALPHA", "älpha", "alpha ", "beta")
WIDE = {"alpha", "Ålpha", "ALPHA", "älpha", "alpha "}

COMMON = """
- name: equal
  description: Values equal to the text.
  parameters: {p: {type: string}}
  sql: SELECT v FROM {table} WHERE v = :p
- name: like_exact
  description: Values LIKE the text, wildcards literal.
  parameters: {p: {type: string, like: exact}}
  sql: SELECT v FROM {table} WHERE v LIKE :p
- name: starting
  description: Values starting with the text.
  parameters: {p: {type: string, like: prefix}}
  sql: SELECT v FROM {table} WHERE v LIKE :p
"""
EXACT_MARIADB = """
- name: binary
  description: Values byte for byte equal to the text.
  parameters: {p: {type: string}}
  sql: SELECT v FROM {table} WHERE v = :p AND BINARY v = :p
- name: nopad_bin
  description: Values equal to the text in a binary, no-pad collation.
  parameters: {p: {type: string}}
  sql: SELECT v FROM {table} WHERE v COLLATE utf8mb4_nopad_bin = :p
- name: pad_bin
  description: Values equal to the text in utf8mb4_bin (trailing spaces still ignored).
  parameters: {p: {type: string}}
  sql: SELECT v FROM {table} WHERE v COLLATE utf8mb4_bin = :p
- name: like_bin
  description: Values LIKE the text in utf8mb4_bin.
  parameters: {p: {type: string, like: exact}}
  sql: SELECT v FROM {table} WHERE v COLLATE utf8mb4_bin LIKE :p
"""

EXPECTED = {
    "sqlite": {
        "equal": {"alpha"},
        "like_exact": {"alpha", "ALPHA"},
        "starting": {"alpha", "ALPHA", "alpha "},
    },
    "postgres": {"equal": {"alpha"}, "like_exact": {"alpha"}, "starting": {"alpha", "alpha "}},
    "mysql": {
        "equal": WIDE,
        "like_exact": WIDE - {"alpha "},
        "starting": WIDE,
        "binary": {"alpha"},
        "nopad_bin": {"alpha"},
        "pad_bin": {"alpha", "alpha "},
        "like_bin": {"alpha"},
    },
}


@pytest.fixture
def probe(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """(dialect, reader URL, probe table) with VALUES, on the engine the test is parametrized with."""
    dialect = request.param
    table = f"mk_fixc2_coll_{tokens.token_hex(3)}"
    rows = [(v,) for v in VALUES]
    if dialect == "sqlite":
        path = tmp_path / "coll.db"
        with sqlite3.connect(path) as db:
            db.execute(f"CREATE TABLE {table} (v TEXT NOT NULL)")
            db.executemany(f"INSERT INTO {table} VALUES (?)", rows)
        db.close()
        yield dialect, f"sqlite:///{path}", table
        return
    db_: CrmDb = request.getfixturevalue({"postgres": "pg_crm", "mysql": "mysql_crm"}[dialect])
    if dialect == "postgres":
        with pg_admin(db_.admin_url) as c:
            c.execute(f"CREATE TABLE {db_.schema}.{table} (v VARCHAR(20) NOT NULL)")
            with c.cursor() as cur:
                cur.executemany(f"INSERT INTO {db_.schema}.{table} VALUES (%s)", rows)
            c.execute(f"GRANT SELECT ON {db_.schema}.{table} TO {db_.role}")
        yield dialect, db_.url, table
        with pg_admin(db_.admin_url) as c:
            c.execute(f"DROP TABLE {db_.schema}.{table}")
        return
    admin = mysql_admin(db_.admin_url)
    try:
        with admin.cursor() as c:
            # spelt out so the test does not depend on the server's default (MariaDB 10.11: this one)
            c.execute(
                f"CREATE TABLE {db_.schema}.{table} (v VARCHAR(20) NOT NULL)"
                " CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"
            )
            c.executemany(f"INSERT INTO {db_.schema}.{table} VALUES (%s)", rows)
        admin.commit()
        yield dialect, db_.url, table
        with admin.cursor() as c:
            c.execute(f"DROP TABLE {db_.schema}.{table}")
    finally:
        admin.close()


@pytest.mark.parametrize(
    "probe", ["sqlite", "postgres", pytest.param("mysql", marks=pytest.mark.mysql)], indirect=True
)
def test_what_equal_like_and_the_exact_forms_match(probe: tuple[str, str, str]) -> None:
    dialect, url, table = probe
    body = COMMON + (EXACT_MARIADB if dialect == "mysql" else "")
    text = "reports:\n" + textwrap.indent(textwrap.dedent(body).replace("{table}", table).strip("\n"), "  ")
    engine = SqlEngine(url)
    try:
        tools = {t.name: t for t in build_report_tools(text + "\n", SqlService(engine, max_rows=50))}
        ctx = Context(call_id="c", tool="r", client=None, principal=None, protocol_version="2025-11-25")
        found = {}
        for name, tool in tools.items():
            runner = tool.handler
            assert isinstance(runner, ReportRunner)
            found[name] = {row[0] for row in runner.run({"p": "alpha"}, ctx).rows}
    finally:
        engine.close()
    assert found == EXPECTED[dialect]
