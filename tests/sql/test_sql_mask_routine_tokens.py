"""Routine bodies the relation scanner misread (red team rt31 F1-F4).

Each: an INVOKER view over the masked `customers.email`, not granted to the reader; the reader's
own INVOKER function reading it in a way the scanner missed; root's DEFINER view calling the
function, opted in with `--allow view:` / `--allow routine:` / `--allow view-order:`. Start-up said
ok and the view answered every e-mail in clear. F1 `FROM (ok o, hv h)`; F2 `{oj hv h LEFT OUTER
JOIN ok o ON 1}`; F3 names with characters outside Python's `\\w` (`ok€hv`, a call `g€(x)`, a
no-break space inside a name, which Python and sqlglot read as a blank); F4 an alias `do` / `end`
ending the list, a digit-initial name `1hv` or function `1g(x)`, a relation named `lateral`; and
a hidden function named like a non-reserved keyword (`status(x)`), skipped as a keyword.
Controls: the same odd syntax over granted tables still serves.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sql.sql_support import MysqlScratch, masks_file, mysql_scratch, run_cli

SECRET = "@secret.example"
NBSP = "\u00a0"
# function -> body; each reads the unseen `customers.email` (through a view or a hidden function)
BROKEN = {
    "f1": "BEGIN DECLARE r TEXT; SELECT h.email INTO r FROM (ok o, hv h) WHERE h.id = x AND o.id = 1;"
    " RETURN r; END",
    "f2": "RETURN (SELECT h.email FROM {oj hv h LEFT OUTER JOIN ok o ON 1} WHERE h.id = x)",
    "f2b": "BEGIN RETURN (SELECT h.email FROM {oj hv h LEFT OUTER JOIN ok o ON 1} WHERE h.id = x); END",
    "f3": "BEGIN RETURN (SELECT h.email FROM ok€hv h WHERE h.id = x); END",
    "f3b": "BEGIN RETURN g€(x); END",
    "f3c": f"RETURN (SELECT h.email FROM ok{NBSP}hv h WHERE h.id = x)",
    "f4": "BEGIN RETURN (SELECT h.email FROM ok do, hv h WHERE h.id = x); END",
    "f4e": "BEGIN RETURN (SELECT h.email FROM ok end, hv h WHERE h.id = x); END",
    "f4b": "BEGIN RETURN (SELECT h.email FROM 1hv h WHERE h.id = x); END",
    "f4c": "BEGIN RETURN (SELECT h.email FROM lateral h WHERE h.id = x); END",
    "f4d": "BEGIN RETURN 1g(x); END",
    # a non-reserved keyword names a stored function too: it was skipped as a keyword
    "f5": "BEGIN RETURN status(x); END",
    # Python folds `ſ` (U+017F) to `s` and reads `٣` (U+0663) as a digit; MariaDB reads names
    "f6": "BEGIN RETURN (SELECT h.email FROM ok ſet, hv h WHERE h.id = x); END",
    "f6b": "BEGIN RETURN (SELECT h.email FROM ſelect h WHERE h.id = x); END",
    "f6c": "BEGIN RETURN (SELECT h.email FROM ٣ h WHERE h.id = x); END",
    "f6d": "BEGIN RETURN ſtatus(x); END",  # the server's collation finds `status`
    # FOR ended the list, but a system-versioned table's FOR SYSTEM_TIME may come before its alias
    "f7": "BEGIN RETURN (SELECT h.email FROM sv FOR SYSTEM_TIME ALL s, hv h WHERE h.id = x); END",
}
# odd but legitimate syntax over granted tables only
CLEAN = {
    "c1": "BEGIN DECLARE r TEXT; SELECT p.label INTO r FROM (ok o, products p) WHERE p.id = x AND o.id = 1;"
    " RETURN r; END",
    "c2": "RETURN (SELECT p.label FROM {oj products p LEFT OUTER JOIN ok o ON 1} WHERE p.id = x)",
    "c3": "BEGIN RETURN (SELECT p.label FROM ok do, ok€p p WHERE p.id = x); END",
    "c4": "BEGIN RETURN (SELECT CONCAT(p.label, '') FROM 1p p /* FROM hv */ WHERE p.id = x); END",
    "c5": "BEGIN DECLARE s VARCHAR(100) DEFAULT CHAR(65); SELECT IF(id IN (1, 2), CONCAT(label, s),"
    " DATE(NOW())) INTO s FROM products AS end WHERE id = x; RETURN s; END",
}


@pytest.fixture
def maria(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "rt31a") as db:
        d, r = db.db, f"'{db.reader}'@'%'"
        inv = "READS SQL DATA SQL SECURITY INVOKER"
        sql = [
            f"CREATE TABLE {d}.customers (id int PRIMARY KEY, name varchar(20), email varchar(80))",
            f"INSERT INTO {d}.customers VALUES (1, 'Ann', 'ann{SECRET}'), (2, 'Bob', 'bob{SECRET}')",
            f"CREATE TABLE {d}.ok (id int PRIMARY KEY)",
            f"CREATE TABLE {d}.sv (id int PRIMARY KEY) WITH SYSTEM VERSIONING",
            f"INSERT INTO {d}.ok VALUES (1)",
            f"CREATE TABLE {d}.products (id int PRIMARY KEY, label varchar(20))",
            f"INSERT INTO {d}.products VALUES (1, 'lamp'), (2, 'desk')",
            f"CREATE TABLE {d}.`ok€p` AS SELECT * FROM {d}.products",
            f"CREATE TABLE {d}.`1p` AS SELECT * FROM {d}.products",
            f"CREATE FUNCTION {d}.`g€`(x int) RETURNS varchar(100) {inv}"
            f" RETURN (SELECT email FROM {d}.customers WHERE id = x)",
            f"CREATE FUNCTION {d}.`1g`(x int) RETURNS varchar(100) {inv}"
            f" RETURN (SELECT email FROM {d}.customers WHERE id = x)",
            f"CREATE FUNCTION {d}.`status`(x int) RETURNS varchar(100) {inv}"
            f" RETURN (SELECT email FROM {d}.customers WHERE id = x)",
        ]
        for view in ("hv", "ok€hv", f"ok{NBSP}hv", "1hv", "lateral", "ſelect", "٣"):
            sql.append(
                f"CREATE SQL SECURITY INVOKER VIEW {d}.`{view}` AS SELECT id, email FROM {d}.customers"
            )
        for fn, body in {**BROKEN, **CLEAN}.items():
            sql += [
                f"CREATE DEFINER={r} FUNCTION {d}.{fn}(x int) RETURNS varchar(100) {inv} {body}",
                f"CREATE VIEW {d}.v_{fn} AS SELECT id, {d}.{fn}(id) AS e FROM {d}.customers",
                f"GRANT EXECUTE ON FUNCTION {d}.{fn} TO {r}",
                f"GRANT SELECT, SHOW VIEW ON {d}.v_{fn} TO {r}",
            ]
        sql += [f"GRANT SELECT (id, name) ON {d}.customers TO {r}"]
        sql += [f"GRANT SELECT ON {d}.`{t}` TO {r}" for t in ("ok", "sv", "products", "ok€p", "1p")]
        with db.admin.cursor() as c:
            for s in sql:
                c.execute(s)
        yield db


def _base(db: MysqlScratch, tmp_path: Path, views: dict[str, str]) -> list[str]:
    out = ["--dsn", db.reader_url, "--mask", masks_file(tmp_path, "customers.email")]
    out += [a for fn in {**BROKEN, **CLEAN} for a in ("--allow", f"routine:{db.db}.{fn}")]
    for fn in views:
        out += ["--allow", f"view:{db.db}.v_{fn}", "--allow", f"view-order:{db.db}.v_{fn}"]
    return out


@pytest.mark.mysql
def test_mariadb_doctor_fails_each_routine_body_the_scanner_misread(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = maria
    code, out = run_cli(capsys, "sql", "doctor", *_base(db, tmp_path, {**BROKEN, **CLEAN}))
    assert code != 0, out
    missed = [
        fn for fn in BROKEN if f"fail masks: view `{db.db}`.`v_{fn}`: it calls function {fn}, " not in out
    ]
    assert not missed, (missed, out)  # before: every one of them (doctor said ok)
    assert all(f"fail masks: view `{db.db}`.`v_{fn}`" not in out for fn in CLEAN), out


@pytest.mark.mysql
@pytest.mark.parametrize("fn", sorted(BROKEN))
def test_mariadb_routine_body_the_scanner_misread_is_refused(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str], fn: str
) -> None:
    base = _base(maria, tmp_path, {**BROKEN, **CLEAN})
    code, out = run_cli(capsys, "sql", "query", *base, f"SELECT id, e FROM v_{fn} ORDER BY id")
    assert code == 2 and SECRET not in out, out  # before: | 1 | ann@secret.example |
    assert f"view `{maria.db}`.`v_{fn}`: it calls function {fn}, which " in out, out


@pytest.mark.mysql
def test_mariadb_routines_over_granted_tables_with_odd_syntax_still_serve(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = maria
    with db.admin.cursor() as c:
        for fn in BROKEN:
            c.execute(f"DROP VIEW {db.db}.v_{fn}")
    base = _base(db, tmp_path, CLEAN)
    for fn in CLEAN:
        code, out = run_cli(capsys, "sql", "query", *base, f"SELECT id, e FROM v_{fn} ORDER BY id")
        assert code == 0 and "desk" in out and SECRET not in out, (fn, out)


@pytest.mark.mysql
def test_mariadb_refuses_every_list_ending_word_as_an_alias_and_relation(maria: MysqlScratch) -> None:
    # the scanner skips an alias unless MariaDB refuses the word as one, and ends a list only at such
    # words; a word it reads as no relation must be refused as a table name
    from mcpkit.sql.profiles.mysql.routine_relations import ENDS, NOT_ALIASES, NOT_RELATIONS

    with maria.admin.cursor() as c:
        for word in sorted(NOT_ALIASES - {"as"}):
            with pytest.raises(Exception, match="1064"):
                c.execute(f"SELECT 1 FROM {maria.db}.ok {word} LIMIT 0")
        for word in sorted(NOT_RELATIONS - {"dual"}):
            with pytest.raises(Exception, match="1064"):
                c.execute(f"CREATE TABLE {maria.db}.t_x AS SELECT 1 FROM {word}")
    assert ENDS <= NOT_ALIASES


@pytest.mark.mysql
def test_mariadb_a_call_hidden_by_database_case_or_a_package_lookalike_is_refused(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Red team rt31 F11: with lower_case_table_names=0, `<DB>.g(x)` (hidden, reads the e-mails) passed
    # as the visible `<db>.g`. F13: `<db2>.action(x)` was skipped as a package call because the
    # caller's database had a visible routine named `<db2>`.
    d, r = maria.db, f"'{maria.reader}'@'%'"
    with maria.admin.cursor() as c:
        c.execute("SELECT @@lower_case_table_names")
        if c.fetchone()[0] != 0:
            pytest.skip("this server compares database names without case")
    low, up, pkg = f"{d}_o", f"{d}_o".upper(), f"{d}_p"
    reads = f"READS SQL DATA SQL SECURITY INVOKER RETURN (SELECT email FROM {d}.customers WHERE id = x)"
    inv = "READS SQL DATA SQL SECURITY INVOKER"
    sql = [
        *(f"CREATE DATABASE `{x}`" for x in (low, up, pkg)),
        f"CREATE DEFINER={r} FUNCTION `{low}`.g(x int) RETURNS varchar(100) NO SQL RETURN 'harmless'",
        f"GRANT EXECUTE ON FUNCTION `{low}`.g TO {r}",
        f"CREATE FUNCTION `{up}`.g(x int) RETURNS varchar(100) {reads}",
        f"CREATE FUNCTION `{pkg}`.action(x int) RETURNS varchar(100) {reads}",
        f"CREATE DEFINER={r} FUNCTION {d}.`{pkg}`() RETURNS int NO SQL RETURN 1",
        f"GRANT EXECUTE ON FUNCTION {d}.`{pkg}` TO {r}",
    ]
    bodies = {"k11": f"RETURN `{up}`.g(x)", "k13": f"RETURN {pkg}.action(x)"}
    for fn, body in bodies.items():
        sql += [
            f"CREATE DEFINER={r} FUNCTION {d}.{fn}(x int) RETURNS varchar(100) {inv} {body}",
            f"CREATE VIEW {d}.v_{fn} AS SELECT id, {d}.{fn}(id) AS e FROM {d}.customers",
            f"GRANT EXECUTE ON FUNCTION {d}.{fn} TO {r}",
            f"GRANT SELECT, SHOW VIEW ON {d}.v_{fn} TO {r}",
        ]
    try:
        with maria.admin.cursor() as c:
            for s in sql:
                c.execute(s)
        base = _base(maria, tmp_path, {**BROKEN, **CLEAN})
        for fn in bodies:
            base += ["--allow", f"routine:{d}.{fn}", "--allow", f"view:{d}.v_{fn}"]
            base += ["--allow", f"view-order:{d}.v_{fn}"]
        base += ["--allow", f"routine:{low}.g", "--allow", f"routine:{d}.{pkg}"]
        for fn in bodies:
            code, out = run_cli(capsys, "sql", "query", *base, f"SELECT id, e FROM v_{fn} ORDER BY id")
            assert code == 2 and SECRET not in out, out  # before: | 1 | ann@secret.example |
            assert f"view `{d}`.`v_{fn}`: it calls function {fn}, which " in out, out
    finally:
        with maria.admin.cursor() as c:
            for x in (low, up, pkg):
                c.execute(f"DROP DATABASE IF EXISTS `{x}`")


# Red team rt33b F1: MariaDB reads `.name` (ODBC) as a table of the current database, wherever a
# relation stands. The scanner stopped expecting a name at the `.`, and a body sqlglot is not trusted
# with (a comment, a compound body) had only that scan: every e-mail through a DEFINER view.
DOTTED = (
    "SELECT email FROM .hv WHERE id = 1 /* by id */",
    "SELECT email FROM . hv",
    "SELECT h.email FROM ok o JOIN .hv h ON 1",
    "SELECT h.email FROM ok o STRAIGHT_JOIN . `hv` h",
    "SELECT h.email FROM ok, .hv AS h",
    "SELECT h.email FROM ok, (. hv h)",
    "SELECT email FROM (((.hv)))",
    "SELECT h.email FROM {oj ok o LEFT JOIN .hv h ON 1}",
    "SELECT h.email FROM {oj .hv h LEFT JOIN ok o ON 1}",
    "SELECT 1 FROM ok WHERE id IN (SELECT id FROM .hv)",
    "DELETE FROM ok USING ok, .hv",
    "UPDATE .hv SET id = 1",
    # `{oj ...}` takes any word for `oj`: `{ok hv h}` is `hv` (the scanner took `ok` for the relation)
    "SELECT h.email FROM {ok hv h}",
    "SELECT h.email FROM ok, {`ok` . hv AS h}",
)


@pytest.mark.mysql
def test_mariadb_reads_a_leading_dot_as_a_relation_of_the_current_database_and_so_does_the_scanner(
    maria: MysqlScratch,
) -> None:
    from mcpkit.sql.profiles.mysql.routine_relations import body_relations

    missed = [sql for sql in DOTTED if (maria.db, "hv") not in body_relations(f"BEGIN {sql}; END", maria.db)]
    assert not missed, missed  # before: each one
    assert (maria.db, "hv") in body_relations("RETURN (SELECT email FROM .hv WHERE id = x /* c */)", maria.db)
    with maria.admin.cursor() as c:
        c.execute(f"USE {maria.db}")
        for sql in DOTTED:  # the server takes each spelling (PREPARE runs nothing)
            c.execute("PREPARE p FROM %s", (sql,))
        c.execute("DEALLOCATE PREPARE p")


@pytest.mark.mysql
def test_mariadb_routine_reading_a_relation_written_with_a_leading_dot_is_refused(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d, r = maria.db, f"'{maria.reader}'@'%'"
    inv = "READS SQL DATA SQL SECURITY INVOKER"
    bodies = {
        "dot1": "RETURN (SELECT email FROM .hv WHERE id = x /* by id */)",
        "dot2": "BEGIN RETURN (SELECT h.email FROM ok o JOIN . `hv` h ON 1 WHERE h.id = x); END",
        "odbc": "BEGIN RETURN (SELECT h.email FROM {ok hv h} WHERE h.id = x); END",
    }
    with maria.admin.cursor() as c:
        for fn in BROKEN:  # the rest of start-up passes: the view answers or is refused on its own
            c.execute(f"DROP VIEW {d}.v_{fn}")
        for fn, body in bodies.items():
            c.execute(f"CREATE DEFINER={r} FUNCTION {d}.{fn}(x int) RETURNS varchar(100) {inv} {body}")
            c.execute(f"CREATE VIEW {d}.v_{fn} AS SELECT id, {d}.{fn}(id) AS e FROM {d}.customers")
            c.execute(f"GRANT EXECUTE ON FUNCTION {d}.{fn} TO {r}")
            c.execute(f"GRANT SELECT, SHOW VIEW ON {d}.v_{fn} TO {r}")
    base = _base(maria, tmp_path, CLEAN)
    for fn in bodies:
        base += [
            "--allow",
            f"routine:{d}.{fn}",
            "--allow",
            f"view:{d}.v_{fn}",
            "--allow",
            f"view-order:{d}.v_{fn}",
        ]
    for fn in bodies:
        code, out = run_cli(capsys, "sql", "query", *base, f"SELECT id, e FROM v_{fn} ORDER BY id")
        assert code == 2 and SECRET not in out, out  # before: | 1 | ann@secret.example |
        assert f"view `{d}`.`v_{fn}`: it calls function {fn}, which names {d}.hv, which " in out, out


# Red team rt33b F4: MariaDB's hex and bit prefixes are lower-case only: `0X1F`, `0B1` are names
# (the scanner took them for numbers and never probed them). F3: every account reads
# information_schema, which tells the row counts per partition of a table partitioned by a masked
# column (its histogram) and a table's sizes; the probe passed, so a body reading it counted clean.
CASED = {
    "hx1": "RETURN (SELECT email FROM 0X1F WHERE id = x)",
    "hx2": "BEGIN RETURN (SELECT h.email FROM ok o, 0B1 h WHERE h.id = x); END",
    "hx3": "BEGIN RETURN 0X2A(x); END",  # a hidden function named `0X2A`
}
SYSTEM = {
    "is1": "RETURN (SELECT CONCAT(table_rows, '') FROM information_schema.PARTITIONS"
    " WHERE table_schema = DATABASE() AND table_name = CONCAT('custo', 'mers') LIMIT 1)",
    "is2": "BEGIN RETURN (SELECT CONCAT(data_length, '') FROM INFORMATION_SCHEMA.`TABLES`"
    " WHERE table_schema = DATABASE() AND table_name = CONCAT('custo', 'mers')); END",
}


def test_upper_case_hex_and_bit_prefixes_are_names_to_the_scanner() -> None:
    from mcpkit.sql.profiles.mysql.routine_relations import body_calls, body_relations

    assert body_relations(CASED["hx1"], "d") == [("d", "0X1F")]  # before: []
    assert ("d", "0B1") in body_relations(CASED["hx2"], "d")
    assert ("d", "0X2A") in body_calls(CASED["hx3"], "d")
    assert body_relations("RETURN (SELECT 0x1F FROM ok WHERE id = 0b1 + 1E5)", "d") == [("d", "ok")]


@pytest.mark.mysql
def test_mariadb_routine_reading_a_cased_hex_name_or_a_system_table_is_refused(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d, r = maria.db, f"'{maria.reader}'@'%'"
    inv = "READS SQL DATA SQL SECURITY INVOKER"
    bodies = {**CASED, **SYSTEM}
    with maria.admin.cursor() as c:
        for fn in BROKEN:  # the rest of start-up passes: the view answers or is refused on its own
            c.execute(f"DROP VIEW {d}.v_{fn}")
        for name in ("0X1F", "0B1"):
            c.execute(f"CREATE SQL SECURITY INVOKER VIEW {d}.`{name}` AS SELECT id, email FROM {d}.customers")
        c.execute(
            f"CREATE FUNCTION {d}.`0X2A`(x int) RETURNS varchar(100) {inv}"
            f" RETURN (SELECT email FROM {d}.customers WHERE id = x)"
        )
        for fn, body in bodies.items():
            c.execute(f"CREATE DEFINER={r} FUNCTION {d}.{fn}(x int) RETURNS varchar(100) {inv} {body}")
            c.execute(f"CREATE VIEW {d}.v_{fn} AS SELECT id, {d}.{fn}(id) AS e FROM {d}.customers")
            c.execute(f"GRANT EXECUTE ON FUNCTION {d}.{fn} TO {r}")
            c.execute(f"GRANT SELECT, SHOW VIEW ON {d}.v_{fn} TO {r}")
    base = _base(maria, tmp_path, CLEAN)
    for fn in bodies:
        base += ["--allow", f"routine:{d}.{fn}", "--allow", f"view:{d}.v_{fn}"]
        base += ["--allow", f"view-order:{d}.v_{fn}", "--allow", f"function:{d}.{fn}"]
    for fn in bodies:
        code, out = run_cli(capsys, "sql", "query", *base, f"SELECT id, e FROM v_{fn} ORDER BY id")
        assert code == 2 and SECRET not in out, out  # before: | 1 | ann@secret.example | (or a size)
        assert f"view `{d}`.`v_{fn}`: it calls function {fn}, which " in out, out
    assert "it calls function is1, which names information_schema.PARTITIONS, which this check" in out
    assert f"it calls function hx1, which names {d}.0X1F, which this account cannot see" in out


def test_routine_scanner_system_schemas_are_the_profiles() -> None:
    from mcpkit.sql.profiles.mysql import MysqlProfile
    from mcpkit.sql.profiles.mysql.routine_relations import SYSTEM_SCHEMAS

    assert MysqlProfile.system_schemas == SYSTEM_SCHEMAS
