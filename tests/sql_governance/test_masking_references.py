"""Red team rt19mask F6: a masked column that references another table's column by a foreign key
(`users2.email REFERENCES email_dir(addr)`): every masked value is one of the referenced column's,
which `grant --mask` granted whole and doctor passed without a word. It is named now (a start-up
warning, `doctor --mask`'s `warn references:` line, a `-- warning:` line from `grant --mask` on
stderr), on all three engines; not refused: it tells which values exist, not which row holds which."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.maskcheck import prepare_masks, reference_hints
from tests.helpers import run_mcpkit
from tests.sql.sql_support import mysql_scratch, pg_scratch

DDL = (
    "CREATE TABLE email_dir (addr VARCHAR(60) PRIMARY KEY)",
    "CREATE TABLE users2 (id INTEGER PRIMARY KEY, email VARCHAR(60) REFERENCES email_dir (addr))",
    "CREATE TABLE plain (id INTEGER PRIMARY KEY, other VARCHAR(60) REFERENCES email_dir (addr))",
)
WANTED = "masked column users2.email references email_dir.addr by a foreign key"


def _masks(tmp_path: Path, *rules: str) -> Path:
    masks = tmp_path / "masks.yaml"
    masks.write_text("masks:\n" + "".join(f"  - {r}\n" for r in rules))
    return masks


def _hints(url: str, masks: Path) -> list[str]:
    engine = SqlEngine(url)
    try:
        _, _, masked = prepare_masks(engine, str(masks))
        return reference_hints(engine, masked)
    finally:
        engine.close()


def test_sqlite_a_masked_column_referencing_an_unmasked_one_is_named(tmp_path: Path) -> None:
    path = tmp_path / "refs.db"
    with sqlite3.connect(path) as db:
        for sql in DDL:
            db.execute(sql)
    db.close()
    url = f"sqlite:///{path}"
    hints = _hints(url, _masks(tmp_path, "users2.email"))
    assert len(hints) == 1 and hints[0].startswith(WANTED), hints
    done = run_mcpkit("sql", "doctor", "--dsn", url, "--mask", str(_masks(tmp_path, "users2.email")))
    assert f"warn references: {WANTED}" in done.stdout, done.stdout
    # masked on both sides: nothing to say
    assert _hints(url, _masks(tmp_path, "users2.email", "email_dir.addr", "plain.other")) == []


@pytest.mark.postgres
def test_postgres_a_masked_column_referencing_an_unmasked_one_is_named(pg_url: str, tmp_path: Path) -> None:
    masks = _masks(tmp_path, "users2.email")
    with pg_scratch(pg_url, "maskfix2_refs") as pg:
        for sql in DDL:
            pg.admin.execute(sql)
        hints = _hints(pg.admin_url, masks)
        assert len(hints) == 1 and hints[0].startswith(WANTED), hints
        tables = "public.email_dir,public.users2"
        done = run_mcpkit(
            "sql",
            "grant",
            "--dsn",
            pg.admin_url,
            "--role",
            f"{pg.reader}_g",
            "--tables",
            tables,
            "--mask",
            str(masks),
        )
        assert done.returncode == 0, done.stderr
        assert f"-- warning: {WANTED}" in done.stderr, done.stderr


@pytest.mark.mysql
def test_mariadb_a_masked_column_referencing_an_unmasked_one_is_named(mysql_url: str, tmp_path: Path) -> None:
    with mysql_scratch(mysql_url, "maskfix2_refs") as my:
        with my.admin.cursor() as c:
            for sql in DDL:
                c.execute(
                    sql.replace("CREATE TABLE ", f"CREATE TABLE {my.db}.").replace(
                        " email_dir (", f" {my.db}.email_dir ("
                    )
                )
        hints = _hints(my.admin_url, _masks(tmp_path, "users2.email"))
        assert len(hints) == 1 and hints[0].startswith(WANTED), hints
