"""DEFINER views reading a masked column, whatever form the relation takes in the stored text
(red team rt25 F0).

Start-up found the relations a view reads after `from` or `join` with a word boundary before the
keyword; MariaDB stores STRAIGHT_JOIN as `straight_join`, so root's DEFINER view `SELECT c.id,
c.email FROM one o STRAIGHT_JOIN customers c`, opted in with `--allow view:`, served the e-mails
in clear (a plain JOIN was refused). Every name of the stored text that names a masked table or
such a view counts now; a relation the account cannot see counts wherever it stands. Each form
of `mariadb_view_forms` is created here, its stored text checked, and refused or served.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sql.mariadb_view_forms import LEAKS, SAFE, SCHEMA, fill
from tests.sql.sql_support import MysqlScratch, mysql_scratch, run_cli

SECRET = "@secret.example"
OTHER = "SELECT c.email FROM {d}.one o STRAIGHT_JOIN {d}.customers c"  # a view in another database


@pytest.fixture
def forms(mysql_url: str, tmp_path: Path) -> Iterator[tuple[MysqlScratch, str, Path]]:
    """Every form as root's DEFINER view, readable (SELECT, SHOW VIEW) by a reader granted what
    `mcpkit sql grant --mask` grants: the unmasked columns of customers and vt."""
    with mysql_scratch(mysql_url, "rt25a") as db:
        d, o = db.db, f"{db.db}_o"
        try:
            with db.admin.cursor() as c:
                c.execute(f"CREATE DATABASE {o}")
                c.execute(f"USE {d}")  # the forms name their tables unqualified
                for sql in SCHEMA:
                    c.execute(fill(sql, d, o))
                for form in (*LEAKS, *SAFE):
                    c.execute(f"CREATE SQL SECURITY DEFINER VIEW {d}.{form.name} AS {fill(form.body, d, o)}")
                c.execute(f"CREATE SQL SECURITY DEFINER VIEW {o}.v_other AS {fill(OTHER, d, o)}")
                for grant in (
                    f"SELECT (id, name) ON {d}.customers",
                    f"SELECT (id) ON {d}.vt",
                    f"SELECT ON {d}.one",
                    f"SELECT ON {d}.`we``ird`",
                    f"SELECT ON {d}.seq",
                    *(f"SELECT, SHOW VIEW ON {d}.{f.name}" for f in (*LEAKS, *SAFE)),
                    f"SELECT, SHOW VIEW ON {o}.v_other",
                ):
                    c.execute(f"GRANT {grant} TO '{db.reader}'@'%'")
            masks = tmp_path / "masks.yaml"
            masks.write_text("masks:\n  - customers.email\n  - vt.email\n", encoding="utf-8")
            yield db, o, masks
        finally:
            with db.admin.cursor() as c:
                c.execute(f"DROP DATABASE IF EXISTS {o}")


def _serve(db: MysqlScratch, o: str, masks: Path) -> list[str]:
    """`mcpkit sql query` as the reader with the masks, every DEFINER view opted in (`--allow`)."""
    out = ["sql", "query", "--dsn", db.reader_url, "--mask", str(masks)]
    out += ["--allow", "clustered-order:vt"]  # no PRIMARY KEY: what is tested is the views' reads
    for view in [*(f"{db.db}.{f.name}" for f in (*LEAKS, *SAFE)), f"{o}.v_other"]:
        out += ["--allow", f"view:{view}", "--allow", f"view-order:{view}"]
    return out


@pytest.mark.mysql
def test_mariadb_stores_each_form_as_the_unit_cases_read_it(forms: tuple[MysqlScratch, str, Path]) -> None:
    db, o, _ = forms
    with db.admin.cursor() as c:
        c.execute(
            "SELECT table_name, view_definition FROM information_schema.VIEWS WHERE table_schema = %s",
            (db.db,),
        )
        stored = {str(n): str(t) for n, t in c.fetchall()}
    for form in (*LEAKS, *SAFE):
        assert stored[form.name] == fill(form.stored, db.db, o), form.name


@pytest.mark.mysql
def test_mariadb_a_definer_view_over_a_straight_join_is_refused_at_start_up(
    forms: tuple[MysqlScratch, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db, o, masks = forms
    with db.admin.cursor() as c:  # the report's set-up: the STRAIGHT_JOIN view is the only route
        for form in (*LEAKS[1:], *SAFE):
            c.execute(f"DROP VIEW {db.db}.{form.name}")
        c.execute(f"DROP VIEW {o}.v_other")
    code, out = run_cli(capsys, *_serve(db, o, masks), "SELECT * FROM v_straight")
    assert code == 2 and SECRET not in out, out  # before: | 1 | ann@secret.example |
    assert f"view `{db.db}`.`v_straight`: it reads a masked column with its definer's rights" in out, out


@pytest.mark.mysql
def test_mariadb_every_form_reading_a_masked_column_is_refused_and_the_others_serve(
    forms: tuple[MysqlScratch, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db, o, masks = forms
    base = _serve(db, o, masks)
    code, out = run_cli(capsys, *base, "SELECT 1")
    assert code == 2 and SECRET not in out, out
    for form in LEAKS:
        assert f"view `{db.db}`.`{form.name}`: it " in out, (form.name, out)
    assert f"view `{o}`.`v_other`: it reads a masked column" in out, out
    assert f"view `{db.db}`.`v_over_view`: it reads view v_straight, which reads a masked column" in out
    assert f"view `{db.db}`.`v_unseen`: it reads {o}.hidden_w, which this check cannot see into" in out
    for form in SAFE:
        assert f"`{form.name}`" not in out, (form.name, out)
    with db.admin.cursor() as c:
        for form in LEAKS:
            c.execute(f"DROP VIEW {db.db}.{form.name}")
        c.execute(f"DROP VIEW {o}.v_other")
    for form in SAFE:
        code, out = run_cli(capsys, *base, f"SELECT * FROM {form.name}")
        assert code == 0 and SECRET not in out and " sent;" in out, (form.name, out)


@pytest.mark.mysql
def test_mariadb_grant_mask_leaves_out_a_straight_join_view(
    forms: tuple[MysqlScratch, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _, masks = forms
    tables = ",".join(f"{db.db}.{t}" for t in ("customers", "one", "v_straight", "c_straight"))
    code, out = run_cli(
        capsys,
        "sql",
        "grant",
        "--dsn",
        db.admin_url,
        "--role",
        "mk_rt25a_g",
        "--tables",
        tables,
        "--mask",
        str(masks),
    )
    assert code == 0, out
    # every DEFINER view is left out as such, start-up refuses it (rtJ L1): c_straight too now
    for view in ("v_straight", "c_straight"):
        assert f"-- left out: view {db.db}.{view} runs as its definer root@" in out, out
        assert f"GRANT SELECT ON `{db.db}`.`{view}`" not in out, out


@pytest.mark.mysql
def test_mariadb_grant_mask_gets_past_a_view_over_a_dropped_function(
    forms: tuple[MysqlScratch, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # Red team rt31 F10: SQLAlchemy cannot reflect such a view (error 1356); grant died on it.
    db, _, masks = forms
    with db.admin.cursor() as c:
        c.execute(f"CREATE FUNCTION {db.db}.gone() RETURNS INT RETURN 1")
        c.execute(f"CREATE VIEW {db.db}.v_broken AS SELECT {db.db}.gone() AS x")
        c.execute(f"DROP FUNCTION {db.db}.gone")
    args = ["sql", "grant", "--dsn", db.admin_url, "--role", "mk_rt31_g", "--tables", f"{db.db}.customers"]
    code, out = run_cli(capsys, *args, "--mask", str(masks))
    assert code == 0, out  # before: UnreflectableTableError, a traceback
    assert "Traceback" not in out
    assert "GRANT SELECT (`id`" in out and "ON `" + db.db + "`.`customers`" in out, out
