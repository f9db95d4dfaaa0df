"""Red team rtg, L2: on MariaDB, `--allow-function DB.NAME` did not admit DB's own view calling that
function: MariaDB stores the call unqualified in the view's definition, so the start-up check read
a bare `name` and refused it; only the bare `--allow-function NAME` (that name in every database)
passed. The exact form now admits the view of its own database, and nothing elsewhere.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import make_url

from mcpkit.sql.admission import FunctionPolicy
from mcpkit.sql.checks import ensure_safe_account, inspect_account
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from tests.sql.sql_support import READER_CONNECTIONS, mysql_admin

pytestmark = pytest.mark.mysql


@pytest.fixture
def login(mysql_url: str) -> Iterator[tuple[str, str]]:
    tag = secrets.token_hex(4)
    db, other, user = f"mk_rtgl2_{tag}", f"mk_rtgl2o_{tag}", f"mk_rtgl2_{tag}_r"
    statements = [
        f"CREATE DATABASE {db}",
        f"CREATE DATABASE {other}",
        f"CREATE TABLE {db}.cust (id INT, name TEXT)",
        f"CREATE FUNCTION {db}.fmt(x INT) RETURNS TEXT DETERMINISTIC NO SQL SQL SECURITY INVOKER"
        " RETURN CONCAT('#', x)",
        f"USE {db}",  # a call written unqualified is stored so: `fmt`(...)
        "CREATE SQL SECURITY INVOKER VIEW v_inv AS SELECT id, fmt(id) AS f FROM cust",
        # a stored function named like a built-in one the table leaves out: a bare call is the built-in's
        f"CREATE FUNCTION {db}.regexp_replace(x TEXT, a TEXT, b TEXT) RETURNS TEXT DETERMINISTIC NO SQL"
        " SQL SECURITY INVOKER RETURN x",
        f"CREATE USER '{user}'@'%' WITH MAX_USER_CONNECTIONS {READER_CONNECTIONS}",
        f"GRANT SELECT ON {db}.cust TO '{user}'@'%'",
        f"GRANT SELECT, SHOW VIEW ON {db}.v_inv TO '{user}'@'%'",
        f"GRANT EXECUTE ON FUNCTION {db}.fmt TO '{user}'@'%'",
    ]
    admin = mysql_admin(mysql_url)
    try:
        with admin.cursor() as c:
            for sql in statements:
                c.execute(sql)
        yield make_url(mysql_url).set(username=user, password=None, database=db).render_as_string(False), db
    finally:
        with admin.cursor() as c:
            for sql in (f"DROP DATABASE IF EXISTS {db}", f"DROP DATABASE IF EXISTS {other}"):
                c.execute(sql)
            c.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        admin.close()


def _check(url: str, allow_function: list[str], db: str) -> None:
    engine = SqlEngine(url, pool_size=0)
    try:
        engine.profile.use_function_policy(FunctionPolicy.for_dialect("mysql", extra=allow_function))
        ensure_safe_account(inspect_account(engine), allow=[f"routine:{db}.fmt"])
    finally:
        engine.close()


def test_the_exact_allow_function_admits_its_databases_view(login: tuple[str, str]) -> None:
    url, db = login
    with pytest.raises(SqlConfigError, match="v_inv"):
        _check(url, [], db)
    with pytest.raises(SqlConfigError, match="v_inv"):  # another database's function of that name
        _check(url, [f"{db.replace('rtgl2', 'rtgl2o')}.fmt"], db)
    _check(url, [f"{db}.fmt"], db)  # before: refused ("--allow-function fmt")
    _check(url, ["fmt"], db)


def test_an_exact_allow_function_named_like_a_built_in_does_not_admit_the_built_in(
    login: tuple[str, str], mysql_url: str
) -> None:
    url, db = login
    admin = mysql_admin(mysql_url)
    try:
        with admin.cursor() as c:
            c.execute(f"USE {db}")
            c.execute(
                "CREATE SQL SECURITY INVOKER VIEW v_rr AS"
                " SELECT REGEXP_REPLACE(name, 'a', 'b') AS r FROM cust"
            )
            c.execute(f"GRANT SELECT, SHOW VIEW ON {db}.v_rr TO '{make_url(url).username}'@'%'")
        # review R11: the exact `db.regexp_replace` (the stored one) admitted the view's built-in call
        with pytest.raises(SqlConfigError, match="v_rr"):
            _check(url, [f"{db}.fmt", f"{db}.regexp_replace"], db)
    finally:
        admin.close()
