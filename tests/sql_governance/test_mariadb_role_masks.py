"""Red team my11 on MariaDB masks: a role granted to the login but not enabled (F8), an INVOKER
function's `SET ROLE` left on a pooled connection (F8), a MERGE table over a masked table (F7)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.admission import FunctionPolicy
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, SqlConfigError
from mcpkit.sql.maskcheck import derive_masks, enforce_masks, prepare_masks
from mcpkit.sql.masking import KnownSchema, MaskPolicy, reflect_schema
from mcpkit.sql.service import Masking, SqlService
from tests.helpers import run_mcpkit
from tests.sql.sql_support import MysqlScratch, mysql_scratch

SSN = "333-33-3333"

pytestmark = pytest.mark.mysql


@pytest.fixture
def maria(mysql_url: str) -> Iterator[MysqlScratch]:
    """customers (id, name, ssn) with the reader granted id and name only; a role `<db>_rb` that
    reads every column, granted to the reader but not its default role."""
    with mysql_scratch(mysql_url, "my11") as scratch:
        db, role = scratch.db, f"{scratch.db}_rb"
        with scratch.admin.cursor() as c:
            c.execute(f"CREATE TABLE {db}.customers (id INT PRIMARY KEY, name VARCHAR(20), ssn VARCHAR(20))")
            c.execute(f"INSERT INTO {db}.customers VALUES (1, 'carol', '{SSN}')")
            c.execute(f"GRANT SELECT (id, name) ON {db}.customers TO '{scratch.reader}'@'%'")
            c.execute(f"CREATE ROLE {role}")
            c.execute(f"GRANT SELECT ON {db}.customers TO {role}")
        try:
            yield scratch
        finally:
            with scratch.admin.cursor() as c:
                c.execute(f"DROP ROLE IF EXISTS {role}")


def _served(url: str, masks: list[str]) -> SqlService:
    """What `serve --mask` (and `doctor --mask`) run at start-up, and the service it serves."""
    engine = SqlEngine(url)
    try:
        policy = MaskPolicy.of(masks)
        mapping = reflect_schema(engine.sa_engine, policy=policy)
        policy, masked = derive_masks(engine, policy, policy.masked_tables(mapping))
        enforce_masks(engine, masked)
    except BaseException:
        engine.close()
        raise
    known = KnownSchema(mapping, engine.dialect, withheld=engine.profile.withheld_relations())
    return SqlService(engine, timeout_s=5.0, masking=Masking(policy, known))


def _answer(service: SqlService, sql: str) -> str:
    try:
        return repr(service.query(sql, call_id="m")[0].rows)
    except (QueryFailed, Refused) as exc:
        return type(exc).__name__


def _enforce(url: str, masks: list[str]) -> None:
    _served(url, masks).engine.close()  # type: ignore[attr-defined]


def test_a_granted_role_that_reads_a_masked_column_is_refused(maria: MysqlScratch) -> None:
    role = f"{maria.db}_rb"
    _enforce(maria.reader_url, ["customers.ssn"])  # no role granted yet: the database withholds ssn
    with maria.admin.cursor() as c:
        c.execute(f"GRANT {role} TO '{maria.reader}'@'%'")  # granted, not a default role
    with pytest.raises(SqlConfigError) as raised:
        _enforce(maria.reader_url, ["customers.ssn"])
    assert f"through role `{role}`" in str(raised.value)
    assert f"REVOKE `{role}` FROM '{maria.reader}'@'%'" in str(raised.value)


def test_an_invoker_functions_set_role_never_outlives_its_call(maria: MysqlScratch) -> None:
    role, db = f"{maria.db}_rb", maria.db
    with maria.admin.cursor() as c:
        c.execute(f"GRANT {role} TO '{maria.reader}'@'%'")
        c.execute(
            f"CREATE FUNCTION {db}.mk_setrole_f() RETURNS INT SQL SECURITY INVOKER"
            f" BEGIN SET ROLE {role}; RETURN 1; END"
        )
        c.execute(f"GRANT EXECUTE ON FUNCTION {db}.mk_setrole_f TO '{maria.reader}'@'%'")
    engine = SqlEngine(maria.reader_url, pool_size=1)
    functions = FunctionPolicy.for_dialect("mysql", extra=[f"{db}.mk_setrole_f", "mk_setrole_f"])
    service = SqlService(engine, timeout_s=5.0, functions=functions)

    def role_now() -> object:
        return service.query("SELECT CURRENT_ROLE() AS r", call_id="role")[0].rows[0][0]

    try:
        assert role_now() is None
        assert service.query(f"SELECT {db}.mk_setrole_f() AS f", call_id="f")[0].rows == [[1]]
        assert role_now() is None  # main: the function's role, on the one pooled connection
        assert role_now() is None
        with pytest.raises(QueryFailed):
            service.query("SELECT ssn FROM customers", call_id="ssn")
    finally:
        engine.close()


def test_a_merge_table_over_a_masked_table_is_masked_by_position(maria: MysqlScratch) -> None:
    db, reader = maria.db, f"'{maria.reader}'@'%'"
    with maria.admin.cursor() as c:
        c.execute(f"CREATE TABLE {db}.cust_my (id INT, name VARCHAR(20), ssn VARCHAR(20)) ENGINE=MyISAM")
        c.execute(f"INSERT INTO {db}.cust_my VALUES (1, 'carol', '{SSN}')")
        # other names, same positions: MERGE maps its columns to the UNION's tables by position
        c.execute(
            f"CREATE TABLE {db}.cust_all (i INT, n VARCHAR(20), s VARCHAR(20)) ENGINE=MRG_MyISAM"
            f" UNION=({db}.cust_my)"
        )
        c.execute(f"GRANT SELECT (id, name) ON {db}.cust_my TO {reader}")
        c.execute(f"GRANT SELECT ON {db}.cust_all TO {reader}")
    with pytest.raises(SqlConfigError) as raised:
        _enforce(maria.reader_url, ["cust_my.ssn"])
    assert f"can read masked column(s) s of `{db}`.`cust_all`" in str(raised.value)
    assert f"REVOKE SELECT ON `{db}`.`cust_all` FROM {reader}" in str(raised.value)
    with maria.admin.cursor() as c:  # the printed fix
        c.execute(f"REVOKE SELECT ON {db}.cust_all FROM {reader}")
        c.execute(f"GRANT SELECT (i, n) ON {db}.cust_all TO {reader}")
    service = _served(maria.reader_url, ["cust_my.ssn"])
    try:
        rows = service.query("SELECT i, n FROM cust_all", call_id="m")[0].rows
        assert rows == [[1, "carol"]]
        assert SSN not in _answer(service, "SELECT i, n, s FROM cust_all")
        assert "carol" not in _answer(service, "SELECT n FROM cust_all WHERE s LIKE '333%'")
        service.masking = None  # the database alone withholds it too
        assert _answer(service, "SELECT s FROM cust_all") == "QueryFailed"
        assert "carol" not in _answer(service, "SELECT n FROM cust_all WHERE s LIKE '333%'")
    finally:
        service.engine.close()  # type: ignore[attr-defined]


def _served_as_serve(url: str, masks: list[str], tmp_path: Path) -> SqlService:
    """What `serve --mask FILE` runs: every database reflected, masks derived and enforced."""
    (tmp_path / "masks.yaml").write_text("masks:\n" + "".join(f"  - {m}\n" for m in masks))
    engine = SqlEngine(url)
    try:
        policy, reflection, masked = prepare_masks(engine, str(tmp_path / "masks.yaml"))
        enforce_masks(engine, masked)
    except BaseException:
        engine.close()
        raise
    known = reflection.known(engine, withheld=engine.profile.withheld_relations())
    return SqlService(engine, timeout_s=5.0, masking=Masking(policy, known, masked))


def test_a_merge_table_in_another_database_is_masked_by_position(maria: MysqlScratch, tmp_path: Path) -> None:
    """Red team mask17 F7: a MERGE table in another database than the DSN's over a masked MyISAM
    table was not derived, so `grant --mask` granted it whole and it answered the masked column."""
    db, other, reader = maria.db, f"{maria.db}_x", f"'{maria.reader}'@'%'"
    with maria.admin.cursor() as c:
        c.execute(f"CREATE TABLE {db}.cust_my (id INT, name VARCHAR(20), ssn VARCHAR(20)) ENGINE=MyISAM")
        c.execute(f"INSERT INTO {db}.cust_my VALUES (1, 'carol', '{SSN}')")
        c.execute(f"CREATE DATABASE {other}")
        c.execute(
            f"CREATE TABLE {other}.cust_all (i INT, n VARCHAR(20), s VARCHAR(20)) ENGINE=MRG_MyISAM"
            f" UNION=({db}.cust_my)"
        )
        c.execute(f"GRANT SELECT (id, name) ON {db}.cust_my TO {reader}")
        c.execute(f"GRANT SELECT ON {other}.cust_all TO {reader}")
    try:
        (tmp_path / "grant.yaml").write_text("masks:\n  - cust_my.ssn\n")
        tables = f"{db}.cust_my,{other}.cust_all"
        args = ["--dsn", maria.admin_url, "--role", f"{db}_g", "--tables", tables, "--mask"]
        done = run_mcpkit("sql", "grant", *args, str(tmp_path / "grant.yaml"))
        assert f"GRANT SELECT (`i`, `n`) ON `{other}`.`cust_all`" in done.stdout, done.stdout + done.stderr
        with pytest.raises(SqlConfigError) as raised:
            _served_as_serve(maria.reader_url, ["cust_my.ssn"], tmp_path)
        assert f"can read masked column(s) s of `{other}`.`cust_all`" in str(raised.value)
        with maria.admin.cursor() as c:  # the printed fix
            c.execute(f"REVOKE SELECT ON {other}.cust_all FROM {reader}")
            c.execute(f"GRANT SELECT (i, n) ON {other}.cust_all TO {reader}")
        service = _served_as_serve(maria.reader_url, ["cust_my.ssn"], tmp_path)
        try:
            assert service.query(f"SELECT i, n FROM {other}.cust_all", call_id="m")[0].rows == [[1, "carol"]]
            for sql in (
                f"SELECT * FROM {other}.cust_all",
                f"SELECT n FROM {other}.cust_all WHERE s LIKE '333%'",
            ):
                answer = _answer(service, sql)
                assert SSN not in answer and "carol" not in answer
        finally:
            service.engine.close()  # type: ignore[attr-defined]
    finally:
        with maria.admin.cursor() as c:
            c.execute(f"DROP DATABASE IF EXISTS {other}")


def test_a_merge_table_granted_to_a_role_not_enabled_is_masked_by_position(maria: MysqlScratch) -> None:
    """A MERGE table over the masked table, granted whole to a role granted to the login but not
    enabled: information_schema shows it only under the role, so it was not derived and start-up
    passed (one `SET ROLE` reads the masked column). Its tables are now listed under each role too."""
    db, reader, role = maria.db, f"'{maria.reader}'@'%'", f"{maria.db}_rm"
    with maria.admin.cursor() as c:
        c.execute(f"CREATE TABLE {db}.cust_my (id INT, name VARCHAR(20), ssn VARCHAR(20)) ENGINE=MyISAM")
        c.execute(f"INSERT INTO {db}.cust_my VALUES (1, 'carol', '{SSN}')")
        c.execute(
            f"CREATE TABLE {db}.cust_all (i INT, n VARCHAR(20), s VARCHAR(20)) ENGINE=MRG_MyISAM"
            f" UNION=({db}.cust_my)"
        )
        c.execute(f"GRANT SELECT (id, name) ON {db}.cust_my TO {reader}")
        c.execute(f"CREATE ROLE {role}")
        c.execute(f"GRANT SELECT ON {db}.cust_all TO {role}")
        c.execute(f"GRANT {role} TO {reader}")
    try:
        with pytest.raises(SqlConfigError) as raised:
            _enforce(maria.reader_url, ["cust_my.ssn"])
        assert f"can read masked column(s) s of `{db}`.`cust_all` through role `{role}`" in str(raised.value)
    finally:
        with maria.admin.cursor() as c:
            c.execute(f"DROP ROLE IF EXISTS {role}")
