"""Legitimate analytical queries on the demo tables: all answered, and answered correctly.

Correctness: the rows from the admitted (regenerated, capped) SQL must equal the rows from the
query as written, run on the same account, so regeneration never changes what a query means.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlglot

from mcpkit.sql.clipping import BinarySize, CellBudget
from mcpkit.sql.dialects import read_dialect
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import Case, DbEnv, load_corpus

CASES = load_corpus("legit.sql")
CAP = 25


def _for(dialect: str) -> list[Case]:
    chosen = []
    for case in CASES:
        wanted = [d.strip() for d in case.meta.get("dialects", "postgres, sqlite, mysql").split(",")]
        if dialect in wanted:
            chosen.append(case)
    return chosen


def test_at_least_eighty_per_dialect() -> None:
    for dialect in ("postgres", "sqlite", "mysql"):
        assert len(_for(dialect)) >= 80, dialect


@pytest.fixture(scope="module")
def sqlite_fts(sqlite_env: DbEnv, tmp_path_factory: pytest.TempPathFactory) -> DbEnv:
    """The demo file with an FTS5 index over the notes, as an operator adds one for text search."""
    import shutil
    import sqlite3

    folder = tmp_path_factory.mktemp("sqlite_fts")
    path = folder / "demo.db"
    shutil.copy(sqlite_env.canary / "demo.db", path)
    conn = sqlite3.connect(path)
    conn.execute("CREATE VIRTUAL TABLE notes_fts USING fts5(notes, content='sales_demo', content_rowid='id')")
    conn.execute("INSERT INTO notes_fts(notes_fts) VALUES ('rebuild')")
    conn.commit()
    conn.close()
    url = f"sqlite:///{path}"
    return DbEnv("sqlite", url, url, url, "main", "", "", folder)


def _key(row: tuple[Any, ...]) -> str:
    return repr(tuple(round(v, 6) if isinstance(v, float) else v for v in row))


def _check(env: DbEnv, case: Case) -> None:
    engine = SqlEngine(env.ro_url)
    try:
        service = SqlService(engine, timeout_s=20.0)
        admitted = service.admit(case.sql, CAP)
        result, markdown = service.query(case.sql, call_id=f"legit-{case.name}", max_rows=CAP)
        assert markdown.splitlines()[0].startswith(f"{result.row_count} row")
        if case.meta.get("compare") == "no":
            return
        capped = engine.execute(admitted.sql, None, CAP, 20.0, "capped")
        clipped = engine.execute(admitted.sql, None, CAP, 20.0, "clipped", clip=CellBudget())
        raw = engine.execute(case.sql.strip().rstrip(";"), None, 100_000, 20.0, "raw")
    finally:
        engine.close()
    # Clipping in SQL changes no value, type or order of these results (binary comes as its size).
    assert [c.name for c in clipped.columns] == [c.name for c in capped.columns]
    sized = [
        tuple(BinarySize(len(v)) if isinstance(v, bytes | memoryview) else v for v in r) for r in capped.rows
    ]
    assert list(map(_key, clipped.rows)) == list(map(_key, sized)) and clipped.more == capped.more
    # Unaliased expressions are named after their text, which regeneration may respell.
    assert len(capped.columns) == len(raw.columns)
    ordered = sqlglot.parse_one(case.sql, read=read_dialect(env.dialect)).args.get("order") is not None
    if len(raw.rows) <= CAP:
        assert not capped.more
        if ordered:  # ORDER BY must survive regeneration and capping (MariaDB drops it in derived tables)
            assert list(map(_key, capped.rows)) == list(map(_key, raw.rows))
        assert sorted(map(_key, capped.rows)) == sorted(map(_key, raw.rows))
    else:
        assert capped.more and len(capped.rows) == CAP
        assert set(map(_key, capped.rows)) <= set(map(_key, raw.rows))


@pytest.mark.parametrize("case", _for("sqlite"), ids=lambda c: c.id)
def test_sqlite_legit(case: Case, sqlite_fts: DbEnv) -> None:
    _check(sqlite_fts, case)


@pytest.mark.postgres
@pytest.mark.parametrize("case", _for("postgres"), ids=lambda c: c.id)
def test_postgres_legit(case: Case, pg_env: DbEnv) -> None:
    _check(pg_env, case)


@pytest.mark.mysql
@pytest.mark.parametrize("case", _for("mysql"), ids=lambda c: c.id)
def test_mysql_legit(case: Case, mysql_env: DbEnv) -> None:
    _check(mysql_env, case)
