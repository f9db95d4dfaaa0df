"""Expression indexes over a masked column get their scan-order warning (red team rt22 F2).

`CREATE INDEX ON people (lower(email))`, and CLUSTER on it, orders the rows by the masked e-mails;
start-up named indexes by their key columns only: PostgreSQL reported the expression key as no
column, and SQLAlchemy skips SQLite's expression indexes altogether, so no `warn scan order` line.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mcpkit.cli import main
from tests.sql.sql_support import pg_scratch


def _scan_order(capsys: pytest.CaptureFixture[str], dsn: str, masks: Path) -> list[str]:
    main(["sql", "doctor", "--dsn", dsn, "--mask", str(masks)])
    out = capsys.readouterr()
    return [line for line in (out.out + out.err).splitlines() if line.startswith("warn scan order:")]


def _masks(tmp_path: Path) -> Path:
    path = tmp_path / "masks.yaml"
    path.write_text("masks:\n  - people.email\n", encoding="utf-8")
    return path


@pytest.mark.postgres
def test_postgres_expression_index_and_cluster_on_it_are_named_to_the_reader(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pg_scratch(pg_url, "exprix") as db:
        db.admin.execute(
            f"""
            CREATE TABLE people (id int PRIMARY KEY, name text, email text);
            INSERT INTO people SELECT g, 'n' || g, 'u' || (g * 7 % 100) || '@x'
              FROM generate_series(1, 100) g;
            CREATE INDEX people_lower ON people (lower(email));
            CREATE INDEX people_name ON people (name) WHERE email IS NOT NULL;  -- a predicate: no order
            GRANT SELECT (id, name) ON people TO {db.reader};
            """
        )
        lines = _scan_order(capsys, db.reader_url, _masks(tmp_path))
        assert any("people.email (expression index people_lower)" in line for line in lines), lines
        assert not any("people_name" in line for line in lines), lines
        db.admin.execute("CLUSTER people USING people_lower")
        lines = _scan_order(capsys, db.reader_url, _masks(tmp_path))
        assert any(
            "people.email (table clustered on expression index people_lower)" in line for line in lines
        )


def test_sqlite_expression_index_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], recwarn: pytest.WarningsRecorder
) -> None:
    path = tmp_path / "people.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            "CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, email TEXT);"
            "CREATE INDEX people_lower ON people (lower(email));"
            "CREATE INDEX people_len ON people (length(name));"
            "INSERT INTO people VALUES (1, 'Ann', 'ann@x'), (2, 'Bob', 'bob@x');"
        )
    conn.close()
    lines = _scan_order(capsys, f"sqlite:///{path}", _masks(tmp_path))
    assert [line.split(": order-dependent")[0] for line in lines] == [
        "warn scan order: scan order may follow masked column people.email (expression index people_lower)"
    ], lines
    assert not [w for w in recwarn if "expression-based index" in str(w.message)]
