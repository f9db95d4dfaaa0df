"""Issue 10 B2: the start-up verification runs again while serving, and a failure fails only that source.

Before: the proof ran once; a view that burns an xid per call (or anything else start-up refuses),
created and granted while the server ran, was served. Now every call's session reads a catalog
fingerprint first and, when it changed, re-runs the verification before the call's SQL.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from mcp import Client, StdioServerParameters
from sqlalchemy.engine import make_url

from mcpkit.sql.clipping import CellBudget
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.reverify import Guard, Unverified, account_check
from mcpkit.sql.service import SqlService
from tests.helpers import ROOT, UNBOUNDED_MEMORY, text_of
from tests.sql.sql_support import DbEnv, mysql_admin

pytestmark = pytest.mark.anyio


def _code(result: Any) -> str:
    return str((result.meta or {}).get("mcpkit/error", {}).get("code", "OK"))


@asynccontextmanager
async def _serving(dsn: str) -> AsyncIterator[Callable[[str], Any]]:
    args = [
        "-m",
        "mcpkit",
        "sql",
        "serve",
        "--dsn",
        dsn,
        "--no-audit",
        "--catalog-check-interval",
        "0",
        *UNBOUNDED_MEMORY,
    ]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))
    async with Client(params, mode="legacy") as client:

        async def ask(sql: str) -> Any:
            return await client.call_tool("execute_query", {"query": sql})

        yield ask


def _pg(env: DbEnv) -> psycopg.Connection[Any]:
    url = make_url(env.admin_url).set(drivername="postgresql").render_as_string(hide_password=False)
    return psycopg.connect(url, autocommit=True)


async def test_postgres_changes_while_serving_are_refused_until_reverted(pg_env: DbEnv) -> None:
    s, ro, tag = pg_env.schema, pg_env.ro_user, secrets.token_hex(4)
    view, fn, log = f"mk_dash_{tag}", f"mk_volatile_{tag}", f"mk_log_{tag}"
    with _pg(pg_env) as admin:
        admin.execute(f"CREATE TABLE {s}.{log} (id serial PRIMARY KEY)")
        admin.execute(f"GRANT SELECT ON {s}.{log} TO {ro}")
        admin.execute(f"CREATE FUNCTION {s}.mk_def_{tag}() RETURNS int LANGUAGE sql STABLE AS $$ SELECT 1 $$")
        admin.execute(f"REVOKE EXECUTE ON FUNCTION {s}.mk_def_{tag}() FROM PUBLIC")  # start-up accepts it
        try:
            async with _serving(pg_env.ro_url) as ask:
                assert _code(await ask("SELECT 1 AS one")) == "OK"

                # a view that burns an xid per call, granted while serving
                admin.execute(
                    f"CREATE VIEW {s}.{view} AS SELECT txid_current() AS snap, pid FROM pg_stat_activity"
                )
                admin.execute(f"GRANT SELECT ON {s}.{view} TO {ro}")
                refused = await ask(f"SELECT snap FROM {view} LIMIT 1")
                assert _code(refused) == "SOURCE_UNVERIFIED"
                assert view not in text_of(refused) and "txid" not in text_of(refused)
                assert _code(await ask("SELECT 1 AS one")) == "SOURCE_UNVERIFIED"  # the whole source
                admin.execute(f"DROP VIEW {s}.{view}")
                # recovered, and the re-verification's own settings (search_path) did not reach the call
                assert _code(await ask(f"SELECT count(*) AS n FROM {log}")) == "OK"

                # a view over a volatile function that writes: refused, and nothing was written
                admin.execute(
                    f"CREATE FUNCTION {s}.mk_bump_{tag}() RETURNS int LANGUAGE sql VOLATILE "
                    f"AS $$ INSERT INTO {s}.{log} DEFAULT VALUES RETURNING id $$"
                )
                admin.execute(f"CREATE VIEW {s}.{view} AS SELECT {s}.mk_bump_{tag}() AS id")
                admin.execute(f"GRANT SELECT ON {s}.{view} TO {ro}")
                assert _code(await ask(f"SELECT id FROM {view}")) == "SOURCE_UNVERIFIED"
                assert admin.execute(f"SELECT count(*) FROM {s}.{log}").fetchone() == (0,)
                admin.execute(f"DROP VIEW {s}.{view}")
                admin.execute(f"DROP FUNCTION {s}.mk_bump_{tag}()")
                assert _code(await ask("SELECT 1 AS one")) == "OK"

                # a volatile function created (EXECUTE goes to PUBLIC by default), then revoked
                admin.execute(
                    f"CREATE FUNCTION {s}.{fn}() RETURNS int LANGUAGE sql VOLATILE AS $$ SELECT 1 $$"
                )
                assert _code(await ask("SELECT 1 AS one")) == "SOURCE_UNVERIFIED"
                admin.execute(f"REVOKE EXECUTE ON FUNCTION {s}.{fn}() FROM PUBLIC")
                assert _code(await ask("SELECT 1 AS one")) == "OK"

                # a function made SECURITY DEFINER and granted to the reader
                admin.execute(f"ALTER FUNCTION {s}.mk_def_{tag}() SECURITY DEFINER")
                admin.execute(f"GRANT EXECUTE ON FUNCTION {s}.mk_def_{tag}() TO {ro}")
                assert _code(await ask("SELECT 1 AS one")) == "SOURCE_UNVERIFIED"
                admin.execute(f"REVOKE EXECUTE ON FUNCTION {s}.mk_def_{tag}() FROM {ro}")
                assert _code(await ask("SELECT 1 AS one")) == "OK"

                # red team pg11, F4: a statistics expression over a hidden plpgsql function (EXECUTE
                # left to PUBLIC), created while serving, runs as the reader when the table is planned
                admin.execute(f"CREATE SCHEMA mk_hid_{tag}")
                admin.execute(
                    f"CREATE FUNCTION mk_hid_{tag}.bucket() RETURNS int LANGUAGE plpgsql IMMUTABLE AS"
                    f" $$ BEGIN PERFORM pg_notify('mk_ran_{tag}', 'bucket'); RETURN 7; END $$"
                )
                assert _code(await ask("SELECT 1 AS one")) == "OK"  # unreachable: nothing runs it
                heard: list[str] = []
                admin.add_notify_handler(lambda n: heard.append(n.payload))
                admin.execute(f"LISTEN mk_ran_{tag}")
                admin.execute(
                    f"CREATE STATISTICS {s}.mk_st_{tag} ON (id % mk_hid_{tag}.bucket()) FROM {s}.{log}"
                )
                assert (
                    _code(await ask(f"SELECT count(*) AS n FROM {log} WHERE id = 1")) == "SOURCE_UNVERIFIED"
                )
                admin.execute("SELECT 1")  # delivers what was sent meanwhile
                assert heard == []
                admin.execute(f"DROP STATISTICS {s}.mk_st_{tag}")
                assert _code(await ask(f"SELECT count(*) AS n FROM {log} WHERE id = 1")) == "OK"

                # the role granted pg_signal_backend
                admin.execute(f"GRANT pg_signal_backend TO {ro}")
                try:
                    assert _code(await ask("SELECT 1 AS one")) == "SOURCE_UNVERIFIED"
                finally:
                    admin.execute(f"REVOKE pg_signal_backend FROM {ro}")
                assert _code(await ask("SELECT 1 AS one")) == "OK"
        finally:
            admin.execute(f"DROP VIEW IF EXISTS {s}.{view}")
            admin.execute(f"DROP FUNCTION IF EXISTS {s}.mk_bump_{tag}()")
            admin.execute(f"DROP FUNCTION IF EXISTS {s}.{fn}()")
            admin.execute(f"DROP FUNCTION IF EXISTS {s}.mk_def_{tag}()")
            admin.execute(f"DROP TABLE IF EXISTS {s}.{log}")
            admin.execute(f"DROP SCHEMA IF EXISTS mk_hid_{tag} CASCADE")
            admin.execute(f"REVOKE pg_signal_backend FROM {ro}")


async def test_postgres_operator_class_planted_while_serving_is_refused_until_dropped(pg_env: DbEnv) -> None:
    """Red team 10 F1: a support function runs with no EXECUTE check, so planting one is a route."""
    s, tag = pg_env.schema, secrets.token_hex(4)
    fn, ops = f"{s}.mk_boxcmp_{tag}", f"{s}.mk_boxops_{tag}"
    with _pg(pg_env) as admin:
        admin.execute(
            f"CREATE FUNCTION {fn}(a box, b box) RETURNS int LANGUAGE plpgsql IMMUTABLE"
            " AS $$ BEGIN RETURN 0; END $$"
        )
        admin.execute(f"REVOKE EXECUTE ON FUNCTION {fn}(box, box) FROM PUBLIC")
        try:
            async with _serving(pg_env.ro_url) as ask:
                assert _code(await ask("SELECT 1 AS one")) == "OK"
                # not DEFAULT: other sessions on this database keep their ORDER BY; the audit
                # still counts it (an index or an explicit opclass reaches it)
                admin.execute(
                    f"CREATE OPERATOR CLASS {ops} FOR TYPE box USING btree AS OPERATOR 1 <, OPERATOR 2 <=,"
                    f" OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >, FUNCTION 1 {fn}(box, box)"
                )
                refused = await ask("SELECT 1 AS one")
                assert _code(refused) == "SOURCE_UNVERIFIED" and "boxcmp" not in text_of(refused)
                admin.execute(f"DROP OPERATOR FAMILY {ops} USING btree")
                assert _code(await ask("SELECT 1 AS one")) == "OK"
        finally:
            admin.execute(f"DROP OPERATOR FAMILY IF EXISTS {ops} USING btree")
            admin.execute(f"DROP FUNCTION IF EXISTS {fn}(box, box)")


def test_postgres_fingerprint_moves_with_parameter_large_object_and_constraint_grants(pg_env: DbEnv) -> None:
    """Red team 10 (2026-12-04 leads): `GRANT SET ON PARAMETER`, a large object's ACL, a new foreign
    key (a masked value's copy) and a collation live in catalogs the fingerprint did not read."""
    s, ro, tag = pg_env.schema, pg_env.ro_user, secrets.token_hex(4)
    engine = SqlEngine(pg_env.ro_url)
    reader = make_url(pg_env.ro_url).set(drivername="postgresql").render_as_string(hide_password=False)
    t1, t2, coll = f"{s}.mk_fpa_{tag}", f"{s}.mk_fpb_{tag}", f"{s}.mk_fpc_{tag}"
    with _pg(pg_env) as admin, psycopg.connect(reader, autocommit=True) as ro_conn:
        admin.execute(f"CREATE TABLE {t1} (id int PRIMARY KEY)")
        admin.execute(f"CREATE TABLE {t2} (a int)")
        admin.execute(f"CREATE FUNCTION {s}.mk_fpe_{tag}() RETURNS int LANGUAGE sql IMMUTABLE RETURN 1")
        oid = admin.execute("SELECT lo_create(0)").fetchone()[0]  # type: ignore[index]
        try:
            for change, undo in (
                (
                    f"GRANT SET ON PARAMETER lo_compat_privileges TO {ro}",
                    f"REVOKE SET ON PARAMETER lo_compat_privileges FROM {ro}",
                ),
                (
                    f"GRANT SELECT ON LARGE OBJECT {oid} TO {ro}",
                    f"REVOKE SELECT ON LARGE OBJECT {oid} FROM {ro}",
                ),
                (
                    f"ALTER TABLE {t2} ADD CONSTRAINT mk_fk_{tag} FOREIGN KEY (a) REFERENCES {t1} (id)",
                    f"ALTER TABLE {t2} DROP CONSTRAINT mk_fk_{tag}",
                ),
                (f'CREATE COLLATION {coll} FROM "C"', f"DROP COLLATION {coll}"),
                (  # red team pg11, F1: extension membership is only a pg_depend row
                    f"ALTER EXTENSION plpgsql ADD FUNCTION {s}.mk_fpe_{tag}()",
                    f"ALTER EXTENSION plpgsql DROP FUNCTION {s}.mk_fpe_{tag}()",
                ),
                (  # red team pg11, F4: a statistics expression runs as the reader
                    f"CREATE STATISTICS {s}.mk_fps_{tag} ON (a % 7) FROM {t2}",
                    f"DROP STATISTICS {s}.mk_fps_{tag}",
                ),
            ):
                before = engine.profile.catalog_fingerprint(ro_conn)
                admin.execute(change)
                try:
                    assert engine.profile.catalog_fingerprint(ro_conn) != before, change
                finally:
                    admin.execute(undo)
        finally:
            admin.execute("SELECT lo_unlink(%s)", (oid,))
            admin.execute(f"DROP TABLE IF EXISTS {t2}, {t1}")
            admin.execute(f"DROP FUNCTION IF EXISTS {s}.mk_fpe_{tag}()")
            admin.execute(f"REVOKE SET ON PARAMETER lo_compat_privileges FROM {ro}")
            engine.close()


async def test_postgres_role_database_and_lower_xid_changes_are_seen(pg_env: DbEnv) -> None:
    """Red team 10c: REPLICATION, GRANT CREATE ON DATABASE, BYPASSRLS on a group the reader is a
    member of, and a GRANT committed by a transaction with a lower xid than the newest catalog row
    (count and max(xmin) unchanged) were all served on; start-up refuses each."""
    s, ro, tag = pg_env.schema, pg_env.ro_user, secrets.token_hex(4)
    grp, f1, f2 = f"mk_grp_{tag}", f"{s}.mk_f1_{tag}", f"{s}.mk_f2_{tag}"
    with _pg(pg_env) as admin:
        db = admin.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
        admin.execute(f"CREATE ROLE {grp} NOLOGIN")
        admin.execute(f"GRANT {grp} TO {ro}")
        for f in (f1, f2):
            admin.execute(f"CREATE FUNCTION {f}(int) RETURNS int LANGUAGE sql VOLATILE AS $$ SELECT $1 $$")
            admin.execute(f"REVOKE EXECUTE ON FUNCTION {f}(int) FROM PUBLIC")
        try:
            async with _serving(pg_env.ro_url) as ask:
                assert _code(await ask("SELECT 1 AS one")) == "OK"
                for change, undo in (
                    (f"ALTER ROLE {ro} REPLICATION", f"ALTER ROLE {ro} NOREPLICATION"),
                    (
                        f'GRANT CREATE ON DATABASE "{db}" TO {ro}',
                        f'REVOKE CREATE ON DATABASE "{db}" FROM {ro}',
                    ),
                    (f"ALTER ROLE {grp} BYPASSRLS", f"ALTER ROLE {grp} NOBYPASSRLS"),
                ):
                    admin.execute(change)
                    try:
                        assert _code(await ask("SELECT 1 AS one")) == "SOURCE_UNVERIFIED", change
                    finally:
                        admin.execute(undo)
                    assert _code(await ask("SELECT 1 AS one")) == "OK", undo

                with _pg(pg_env) as low:
                    low.autocommit = False
                    low.execute("SELECT txid_current()")  # this transaction's xid is now the lower one
                    admin.execute(f"ALTER FUNCTION {f2}(int) COST 150")  # a newer xid in pg_proc
                    assert _code(await ask("SELECT 2 AS two")) == "OK"  # verified again: passes
                    low.execute(f"GRANT EXECUTE ON FUNCTION {f1}(int) TO {ro}")
                    low.commit()
                assert _code(await ask("SELECT 3 AS three")) == "SOURCE_UNVERIFIED"
        finally:
            admin.execute(f"ALTER ROLE {ro} NOREPLICATION")
            admin.execute(f'REVOKE CREATE ON DATABASE "{db}" FROM {ro}')
            for f in (f1, f2):
                admin.execute(f"DROP FUNCTION IF EXISTS {f}(int)")
            admin.execute(f"DROP ROLE IF EXISTS {grp}")


async def test_mariadb_definer_routine_granted_while_serving_is_refused_until_dropped(
    mysql_env: DbEnv, mysql_url: str
) -> None:
    db, ro, fn = mysql_env.schema, mysql_env.ro_user, f"mk_definer_{secrets.token_hex(4)}"
    admin = mysql_admin(mysql_url)
    try:
        async with _serving(mysql_env.ro_url) as ask:
            assert _code(await ask("SELECT 1 AS one")) == "OK"
            with admin.cursor() as c:
                c.execute(f"CREATE FUNCTION {db}.{fn}() RETURNS INT SQL SECURITY DEFINER RETURN 1")
                c.execute(f"GRANT EXECUTE ON FUNCTION {db}.{fn} TO '{ro}'@'%'")
            refused = await ask("SELECT 1 AS one")  # admission refuses the routine's name by itself
            assert _code(refused) == "SOURCE_UNVERIFIED" and fn not in text_of(refused)
            with admin.cursor() as c:
                c.execute(f"DROP FUNCTION {db}.{fn}")
            assert _code(await ask("SELECT 1 AS one")) == "OK"
    finally:
        with admin.cursor() as c:
            c.execute(f"DROP FUNCTION IF EXISTS {db}.{fn}")
        admin.close()


def test_sqlite_schema_change_reverifies_before_the_next_call(sqlite_copy: DbEnv) -> None:
    import sqlite3

    path = make_url(sqlite_copy.ro_url).database or ""
    runs: list[str] = []
    check = account_check((), False)

    def verify(engine: SqlEngine, conn: Any) -> None:
        runs.append("verify")
        check(engine, conn)
        names = {r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master").fetchall()}
        if "mk_forbidden" in names:  # stands for a finding of the real checks
            raise SqlConfigError("mk_forbidden exists")

    engine = SqlEngine(sqlite_copy.ro_url)
    engine.guard = Guard(verify, "sqlite test", every_s=0)
    service = SqlService(engine)
    try:
        service.query("SELECT 1 AS one", call_id="a")
        service.query("SELECT 1 AS one", call_id="b")
        assert runs == ["verify"]  # once, then only the fingerprint while nothing changes
        with sqlite3.connect(path) as w:
            w.execute("CREATE TABLE mk_new (a)")
        got, _ = service.query("SELECT count(*) AS n FROM mk_new", call_id="c")
        assert runs == ["verify", "verify"] and got.rows == [[0]]
        with sqlite3.connect(path) as w:
            w.execute("CREATE TABLE mk_forbidden (a)")
        with pytest.raises(Unverified):
            service.query("SELECT 1 AS one", call_id="d")
        with sqlite3.connect(path) as w:
            w.execute("DROP TABLE mk_forbidden")
        got, _ = service.query("SELECT 1 AS one", call_id="e")
        assert got.rows == [[1]]
    finally:
        engine.close()


async def test_a_failed_reverification_fails_only_that_source(pg_env: DbEnv, sqlite_copy: DbEnv) -> None:
    s, fn = pg_env.schema, f"mk_volatile_{secrets.token_hex(4)}"
    args = ["-m", "mcpkit", "sql", "serve", "--no-audit", "--catalog-check-interval", "0"]
    args += ["--dsn", f"pg={pg_env.ro_url}", "--dsn", f"lite={sqlite_copy.ro_url}", *UNBOUNDED_MEMORY]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))
    with _pg(pg_env) as admin:
        try:
            async with Client(params, mode="legacy") as client:

                async def ask(source: str) -> Any:
                    return await client.call_tool(
                        "execute_query", {"query": "SELECT 1 AS one", "source": source}
                    )

                assert [_code(await ask(n)) for n in ("pg", "lite")] == ["OK", "OK"]
                admin.execute(
                    f"CREATE FUNCTION {s}.{fn}() RETURNS int LANGUAGE sql VOLATILE AS $$ SELECT 1 $$"
                )
                assert [_code(await ask(n)) for n in ("pg", "lite")] == ["SOURCE_UNVERIFIED", "OK"]
                admin.execute(f"DROP FUNCTION {s}.{fn}()")
                assert [_code(await ask(n)) for n in ("pg", "lite")] == ["OK", "OK"]
        finally:
            admin.execute(f"DROP FUNCTION IF EXISTS {s}.{fn}()")


def test_the_verification_itself_runs_unguarded(sqlite_copy: DbEnv) -> None:
    """`inspect_account` on a guarded engine (a role login checked at start-up) reports its findings
    as the start-up check does, instead of being refused by the guard it feeds."""
    from mcpkit.sql.checks import inspect_account

    def refuse_all(engine: SqlEngine, conn: Any) -> None:
        raise SqlConfigError("always")

    engine = SqlEngine(sqlite_copy.ro_url)
    engine.guard = Guard(refuse_all, "sqlite test", every_s=0)
    try:
        with pytest.raises(Unverified):
            SqlService(engine).query("SELECT 1 AS one", call_id="a")
        assert inspect_account(engine).dialect == "sqlite"
        with pytest.raises(Unverified):  # and the guard is back on after it
            SqlService(engine).query("SELECT 1 AS one", call_id="b")
    finally:
        engine.close()


def test_a_new_connection_reads_the_catalog_before_its_first_call(pg_env: DbEnv) -> None:
    s, fn = pg_env.schema, f"mk_volatile_{secrets.token_hex(4)}"
    engine = SqlEngine(pg_env.ro_url, pool_size=1)
    engine.guard = Guard(
        account_check((), False), "pg test", every_s=3600
    )  # no re-read on a known connection
    service = SqlService(engine)
    with _pg(pg_env) as admin:
        try:
            service.query("SELECT 1 AS one", call_id="a")
            admin.execute(f"CREATE FUNCTION {s}.{fn}() RETURNS int LANGUAGE sql VOLATILE AS $$ SELECT 1 $$")
            service.query("SELECT 1 AS one", call_id="b")  # the same connection, inside the interval
            engine.sa_engine.dispose()  # the pool opens a new connection for the next call
            with pytest.raises(Unverified):
                service.query("SELECT 1 AS one", call_id="c")
        finally:
            admin.execute(f"DROP FUNCTION IF EXISTS {s}.{fn}()")
            engine.close()


def test_the_verification_runs_inside_the_calls_read_only_transaction_on_the_pipelined_path(
    pg_env: DbEnv,
) -> None:
    # PostgreSQL's execute sends its begin in the query's pipeline; a call whose guard is due
    # must still verify inside the read-only transaction, and then run its query in it.
    seen: list[tuple[str, str]] = []

    def verify(engine: SqlEngine, conn: Any) -> None:
        row = conn.exec_driver_sql("SELECT current_setting('transaction_read_only'), now()::text").one()
        seen.append((row[0], row[1]))

    engine = SqlEngine(pg_env.ro_url, pool_size=1)
    engine.guard = Guard(verify, "pg test", interval_s=1e-9, every_s=0)  # verify on every call
    try:
        for call in ("a", "b"):
            rows = engine.execute(
                "SELECT current_setting('transaction_read_only') AS ro, now()::text AS t",
                None,
                5,
                5.0,
                call,
                clip=CellBudget(),  # the pipelined path
            )
            ro, started = rows.rows[0]
            assert ro == "on"
            assert (ro, started) == seen[-1]  # one transaction: the check's and the query's now() agree
        assert len(seen) == 2
    finally:
        engine.close()


def test_the_verifications_own_settings_are_undone_before_the_calls_sql(pg_env: DbEnv) -> None:
    # The profile's `undone` (PostgreSQL: a savepoint) keeps a check's SET LOCAL from the query.
    def verify(engine: SqlEngine, conn: Any) -> None:
        conn.exec_driver_sql("SET LOCAL search_path = pg_catalog")

    engine = SqlEngine(pg_env.ro_url, pool_size=1)
    engine.guard = Guard(verify, "pg test", interval_s=1e-9, every_s=0)  # verify on every call
    try:
        sql = "SELECT current_setting('search_path') AS p"
        before = engine.execute(sql, None, 5, 5.0, "a").rows
        assert before and before[0][0] != "pg_catalog"
        assert engine.execute(sql, None, 5, 5.0, "b", clip=CellBudget()).rows == before  # pipelined
    finally:
        engine.close()


async def test_mariadb_privilege_given_to_a_nested_role_not_enabled_while_serving_is_refused(
    mysql_env: DbEnv, mysql_url: str
) -> None:
    # Issue 10: a role granted to the login but not enabled, and a role nested in it, gained FILE
    # while serving, unnoticed: SHOW GRANTS lists neither's privileges until SET ROLE.
    ro, tag = mysql_env.ro_user, secrets.token_hex(4)
    outer, inner = f"mk_rv_{tag}_o", f"mk_rv_{tag}_i"
    admin = mysql_admin(mysql_url)
    with admin.cursor() as c:
        c.execute(f"CREATE ROLE {inner}")
        c.execute(f"CREATE ROLE {outer}")
        c.execute(f"GRANT {inner} TO {outer}")
        c.execute(f"GRANT {outer} TO '{ro}'@'%'")
    try:
        async with _serving(mysql_env.ro_url) as ask:
            assert _code(await ask("SELECT 1 AS one")) == "OK"
            with admin.cursor() as c:
                c.execute(f"GRANT FILE ON *.* TO {inner}")
            assert _code(await ask("SELECT 1 AS one")) == "SOURCE_UNVERIFIED"
            with admin.cursor() as c:
                c.execute(f"REVOKE FILE ON *.* FROM {inner}")
            got = await ask("SELECT CURRENT_ROLE() AS r")
            assert _code(got) == "OK" and outer not in text_of(got)  # the session's role was put back
    finally:
        with admin.cursor() as c:
            c.execute(f"DROP ROLE IF EXISTS {outer}")
            c.execute(f"DROP ROLE IF EXISTS {inner}")
        admin.close()
