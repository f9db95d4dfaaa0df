"""MariaDB routines executable only through PUBLIC, and views over the catalog (red team rt35b).

F1: `GRANT EXECUTE ON FUNCTION db.tick TO PUBLIC` hides `tick` from information_schema.ROUTINES, so
it was never in the per-row set: with the `--allow routine:db.tick` least privilege offers,
`SUM(id * POW(10, tick(id) - 1))` answered the masked e-mail ranking in one call, and (F1b) so did an
INVOKER view calling it. F4: a PACKAGE granted to PUBLIC got no finding at all (F4b: through a view
too). F2: an INVOKER view over information_schema answered partition row counts with the reader's
own rights, and the DEFINER view's printed fix led there. Now every routine the login can execute
counts (ROUTINES, SHOW GRANTS, mysql.proc), a name `--allow-function` admits that names none of them
counts too, and every view naming a system schema is a start-up finding.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest
import sqlglot

from mcpkit.sql.admission import FunctionPolicy
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.identities import IdentityRouter, RoleMap
from mcpkit.sql.maskcheck import (
    enforce_identity_masks,
    enforce_identity_order,
    order_check,
    ordered_schema,
    per_row_routines,
    prepare_masks,
)
from mcpkit.sql.masking.shapes import refuse_shapes
from mcpkit.sql.masking.taint import MaskRefused
from mcpkit.sql.service import Masking, SqlService
from tests.sql.sql_support import MysqlScratch, masks_file, mysql_scratch, row_order_routines
from tests.sql.sql_support import run_cli as _run

# Grants to PUBLIC reach every login of the server: runs after the parallel part, alone.
pytestmark = pytest.mark.serial

ROWS = [(1, "mike"), (2, "alice"), (3, "zed"), (4, "carl"), (5, "ben"), (6, "quinn")]
CODE = "361452"  # sum(id * 10^(tick-1)): the ids in e-mail order 2 5 4 1 6 3, read right to left
UNLISTED = "does not list it"


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "mystart") as db, db.admin.cursor() as c:
        d, r = db.db, f"'{db.reader}'@'%'"
        rows = ", ".join(f"({i}, 'n{i}', '{e}@x.org')" for i, e in ROWS)
        c.execute("SET @mystart_mode = @@session.sql_mode")
        try:
            for sql in (
                f"CREATE TABLE {d}.customers (id int PRIMARY KEY, name varchar(20), email varchar(80),"
                " KEY k_email (email, id))",
                f"INSERT INTO {d}.customers VALUES {rows}",
                f"GRANT SELECT (id, name) ON {d}.customers TO {r}",
                f"CREATE FUNCTION {d}.tick(x INT) RETURNS INT DETERMINISTIC SQL SECURITY INVOKER"
                " RETURN (@mystart_c := COALESCE(@mystart_c, 0) + 1)",
                f"GRANT EXECUTE ON FUNCTION {d}.tick TO PUBLIC",
                "SET sql_mode = ORACLE",
                f"CREATE PACKAGE {d}.pkg AS FUNCTION f(x INT) RETURN INT; END",
                f"CREATE PACKAGE BODY {d}.pkg AS cnt INT := 0;"
                " FUNCTION f(x INT) RETURN INT AS BEGIN cnt := cnt + 1; RETURN cnt; END; END",
                f"GRANT EXECUTE ON PACKAGE {d}.pkg TO PUBLIC",
                f"GRANT EXECUTE ON PACKAGE BODY {d}.pkg TO PUBLIC",
                "SET sql_mode = @mystart_mode",
            ):
                c.execute(sql)
            yield db
        finally:
            c.execute("SET sql_mode = ORACLE")
            for sql in (
                f"REVOKE EXECUTE ON FUNCTION {d}.tick FROM PUBLIC",
                f"REVOKE EXECUTE ON PACKAGE {d}.pkg FROM PUBLIC",
                f"REVOKE EXECUTE ON PACKAGE BODY {d}.pkg FROM PUBLIC",
            ):
                with suppress(Exception):  # not granted (the fixture failed before)
                    c.execute(sql)
            c.execute("SET sql_mode = @mystart_mode")


def _args(my: MysqlScratch, tmp_path: Path, *more: str) -> list[str]:
    masks = masks_file(tmp_path, "customers.email")
    # the least-privilege opt-ins the PUBLIC grants ask for: what the red team was offered
    allow = ["--allow", f"routine:{my.db}.tick", "--allow", f"routine:{my.db}.pkg"]
    return ["--dsn", my.reader_url, "--mask", masks, *allow, *more]


def _ranks(call: str) -> str:
    return f"SELECT SUM(id * POW(10, {call} - 1)) AS code FROM customers"


@pytest.mark.mysql
def test_a_function_granted_to_public_counts_as_per_row(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = row_order_routines(my.reader_url)
    assert UNLISTED in found.get((my.db, "tick"), ""), found  # before: not there (ROUTINES hides it)
    fn = ["--allow-function", f"{my.db}.tick", "--allow-function", f"{my.db}.pkg.f"]
    code, out = _run(capsys, "sql", "query", *_args(my, tmp_path, *fn), _ranks(f"{my.db}.tick(id)"))
    assert code == 2 and CODE not in out, out  # before: | 361452 |
    assert f"function {my.db}.tick may answer in the scan order" in out, out
    assert f"--allow function-order:{my.db}.tick" in out, out
    # the per-call check counts it too
    engine = SqlEngine(my.reader_url)
    try:
        engine.profile.use_function_policy(FunctionPolicy.for_dialect("mysql", extra=[f"{my.db}.tick"]))
        per_row = per_row_routines(engine)
    finally:
        engine.close()
    with pytest.raises(MaskRefused, match="changes from row to row"):
        refuse_shapes(sqlglot.parse_one(_ranks(f"{my.db}.tick(id)"), read="mysql"), "mysql", per_row)
    # accepted with its opt-in: the order it hands on is the operator's choice
    opt_in = [*fn, "--allow", f"function-order:{my.db}.tick", "--allow", f"function-order:{my.db}.pkg"]
    code, out = _run(capsys, "sql", "query", *_args(my, tmp_path, *opt_in), "SELECT id FROM customers")
    assert code == 0 and "| 6 |" in out, out


@pytest.mark.mysql
def test_a_view_calling_a_public_function_refuses_start_up(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d, r = my.db, f"'{my.reader}'@'%'"
    with my.admin.cursor() as c:
        for view, call in (("v_tick", f"{d}.tick(id)"), ("v_pkg", f"{d}.pkg.f(id)")):
            c.execute(
                f"CREATE SQL SECURITY INVOKER VIEW {d}.{view} AS {_ranks(call)}".replace(
                    "customers", f"{d}.customers"
                )
            )
            c.execute(f"GRANT SELECT, SHOW VIEW ON {d}.{view} TO {r}")
    views = ["--allow", f"view:{d}.v_tick", "--allow", f"view:{d}.v_pkg"]
    for view in ("v_tick", "v_pkg"):
        code, out = _run(capsys, "sql", "query", *_args(my, tmp_path, *views), f"SELECT code FROM {view}")
        assert code == 2 and CODE not in out, out  # before: | 361452 | (F1b, F4b)
        assert f"view {d}.{view} may answer in the scan order of a masked table" in out, out


@pytest.mark.mysql
def test_a_package_granted_to_public_is_found(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    masks = masks_file(tmp_path, "customers.email")
    base = ["--dsn", my.reader_url, "--mask", masks, "--allow", f"routine:{my.db}.tick"]
    code, out = _run(capsys, "sql", "doctor", *base, "--allow-function", f"{my.db}.pkg.f")
    assert f"can run package {my.db}.pkg (EXECUTE granted to PUBLIC)" in out, out  # before: ok
    assert f"--allow routine:{my.db}.pkg" in out, out
    found = row_order_routines(my.reader_url)
    assert "it is a package" in found.get((my.db, "pkg"), ""), found
    fn = ["--allow-function", f"{my.db}.pkg.f"]
    code, out = _run(capsys, "sql", "query", *_args(my, tmp_path, *fn), _ranks(f"{my.db}.pkg.f(id)"))
    assert code == 2 and CODE not in out, out  # before: | 361452 |
    assert f"--allow function-order:{my.db}.pkg" in out, out


@pytest.mark.mysql
def test_a_function_name_no_routine_answers_to_counts_as_per_row(my: MysqlScratch) -> None:
    engine = SqlEngine(my.reader_url)
    try:
        extra = [f"{my.db}.ghost", f"{my.db}.ghostpkg.f", "phantom", "upper", f"{my.db}.gh*"]
        engine.profile.use_function_policy(FunctionPolicy.for_dialect("mysql", extra=extra))
        with engine.session(30.0, "test") as (conn, _):
            found = engine.profile.row_order_routines(conn)
        per_row = per_row_routines(engine, [f"function-order:{my.db}.ghost"])
    finally:
        engine.close()
    assert {(my.db, "ghost"), (my.db, "ghostpkg"), (my.db, "phantom")} <= set(found), found
    assert not {n for _, n in found} & {"upper", "gh*"}, found
    assert "ghostpkg" in per_row and "phantom" in per_row and "ghost" not in per_row, per_row


@pytest.mark.mysql
def test_a_view_over_the_catalog_refuses_start_up(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d, r = my.db, f"'{my.reader}'@'%'"
    rows = "SELECT TABLE_NAME AS t, TABLE_ROWS AS n FROM information_schema.PARTITIONS"
    rows += f" WHERE TABLE_SCHEMA = '{d}'"
    with my.admin.cursor() as c:
        c.execute(f"CREATE SQL SECURITY INVOKER VIEW {d}.v_parts AS {rows}")
        c.execute(f"GRANT SELECT, SHOW VIEW ON {d}.v_parts TO {r}")
    fn = ["--allow", f"function-order:{d}.tick", "--allow", f"function-order:{d}.pkg"]
    code, out = _run(capsys, "sql", "query", *_args(my, tmp_path, *fn), "SELECT t, n FROM v_parts")
    assert code == 2 and "| customers |" not in out, out  # before: answered with the reader's rights
    assert f"view {d}.v_parts reads the database's catalog (information_schema.PARTITIONS" in out, out
    code, out = _run(capsys, "sql", "doctor", *_args(my, tmp_path, *fn))
    assert f"fail masks: view {d}.v_parts reads the database's catalog" in out, out
    opt_in = [*fn, "--allow", f"view-order:{d}.v_parts"]
    code, out = _run(capsys, "sql", "query", *_args(my, tmp_path, *opt_in), "SELECT t, n FROM v_parts")
    assert code == 0 and "| customers |" in out, out
    # a DEFINER view over the catalog: the printed fix no longer leads to the INVOKER view above
    with my.admin.cursor() as c:
        c.execute(f"CREATE SQL SECURITY DEFINER VIEW {d}.v_parts_d AS {rows}")
        c.execute(f"GRANT SELECT, SHOW VIEW ON {d}.v_parts_d TO {r}")
    code, out = _run(capsys, "sql", "doctor", *_args(my, tmp_path, *opt_in))
    line = next(x for x in out.splitlines() if f"view {d}.v_parts_d, which runs as its definer" in x)
    assert "ALTER SQL SECURITY INVOKER" not in line and "as INVOKER it would hand the catalog" in line, line


@pytest.mark.mysql
def test_a_function_only_a_role_login_sees_counts_for_its_calls(my: MysqlScratch, tmp_path: Path) -> None:
    """L1: the per-row set was the DSN login's only, so each call of a role whose login saw a function
    the account did not failed its re-verification ("restart the server", which never helped)."""
    d, emea = my.db, f"{my.reader}e"
    with my.admin.cursor() as c:
        c.execute(f"CREATE USER '{emea}'@'%' IDENTIFIED BY 'pw' WITH MAX_USER_CONNECTIONS 20")
    try:
        with my.admin.cursor() as c:
            c.execute(f"GRANT SELECT (id, name) ON {d}.customers TO '{emea}'@'%'")
            c.execute(
                f"CREATE DEFINER = '{emea}'@'%' FUNCTION {d}.tick3(x INT) RETURNS INT DETERMINISTIC"
                " SQL SECURITY INVOKER"
                " RETURN (@mystart_c3 := COALESCE(@mystart_c3, 0) + 1)"
            )
            c.execute(f"GRANT EXECUTE ON FUNCTION {d}.tick3 TO '{emea}'@'%'")
            c.execute(f"REVOKE EXECUTE ON FUNCTION {d}.tick FROM PUBLIC")
            c.execute("SET sql_mode = ORACLE")
            c.execute(f"REVOKE EXECUTE ON PACKAGE {d}.pkg FROM PUBLIC")
            c.execute(f"REVOKE EXECUTE ON PACKAGE BODY {d}.pkg FROM PUBLIC")
            c.execute("SET sql_mode = @mystart_mode")
        roles = tmp_path / "roles.yaml"
        roles.write_text(
            "principals:\n  alice: role_e\nlogins:\n  role_e: {user: EMEA_USER, password: EMEA_PASSWORD}\n",
            encoding="utf-8",
        )
        env = {"EMEA_USER": emea, "EMEA_PASSWORD": "pw"}
        engine = SqlEngine(my.reader_url)
        policy = FunctionPolicy.for_dialect("mysql", extra=[f"{d}.tick*"])  # a pattern: no name to count
        allow = [f"routine:{d}.tick3"]
        router = None
        try:
            service = SqlService(engine, catalog=None, functions=policy)
            policy_, reflection, masked = prepare_masks(engine, masks_file(tmp_path, "customers.email"))
            known_schema = ordered_schema(engine, reflection, policy_, masked, allow)
            assert "tick3" not in known_schema.per_row  # the account does not see it
            masking = Masking(policy_, known_schema, masked)
            router = IdentityRouter(service, RoleMap.from_yaml(str(roles)), secret=env.get)
            per_role = enforce_identity_masks(router, masking)
            enforce_identity_order(router, masking, per_role, allow)
            assert "tick3" in known_schema.per_row  # before: not, so every role_e call failed below
            check = order_check(policy_, known_schema, per_role["role_e"], allow)
            for _, login in router.identities():
                with login.session(10.0, "again") as (conn, _):
                    check(login, conn)  # before: "function ...tick3 may now change ...; restart the server"
        finally:
            if router is not None:
                router.close()
            engine.close()
    finally:
        with my.admin.cursor() as c:
            c.execute(f"DROP USER IF EXISTS '{emea}'@'%'")
