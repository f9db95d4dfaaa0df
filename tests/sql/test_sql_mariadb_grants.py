"""MariaDB: every grant the login holds is judged against the reader's allowlist (red team 10, F1),
and strings longer than the default max_sort_length sort right (F4).

Each careless set-up is granted to a fresh login (or to a role granted to it, not enabled), and
`mcpkit sql doctor` must refuse it (exit 1) with the REVOKE that removes it, or, for a data write
the read-only transaction refuses, warn with the REVOKE and still pass.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import pymysql
import pytest
from sqlalchemy.engine import make_url

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.profiles.mysql.privileges import judge_grants
from tests.sql.sql_support import READER_CONNECTIONS, mcpkit_here, mysql_admin

pytestmark = pytest.mark.mysql


@dataclass(frozen=True)
class Scratch:
    db: str
    login: str  # 'u'@'%'
    role: str  # granted to the login, not its default role
    url: str
    admin_url: str

    def run(self, *statements: str) -> None:
        admin = mysql_admin(self.admin_url)
        try:
            with admin.cursor() as c:
                for sql in statements:
                    c.execute(sql.format(db=self.db, u=self.login, r=self.role))
        finally:
            admin.close()


@pytest.fixture
def scratch(mysql_url: str) -> Iterator[Scratch]:
    tag = secrets.token_hex(4)
    db, user, role = f"mk_gr_{tag}_db", f"mk_gr_{tag}_u", f"mk_gr_{tag}_r"
    s = Scratch(
        db,
        f"'{user}'@'%'",
        role,
        make_url(mysql_url).set(username=user, password=None, database=db).render_as_string(False),
        mysql_url,
    )
    s.run(
        "CREATE DATABASE {db}",
        "CREATE TABLE {db}.t (id INT PRIMARY KEY, name VARCHAR(20))",
        "CREATE SEQUENCE {db}.s",
        f"CREATE USER {{u}} WITH MAX_USER_CONNECTIONS {READER_CONNECTIONS}",
        "CREATE ROLE {r}",
        "GRANT {r} TO {u}",
        "GRANT SELECT ON {db}.* TO {u}",
    )
    try:
        yield s
    finally:
        s.run("DROP DATABASE {db}", "DROP USER {u}", "DROP ROLE {r}")


# (id, GRANT statement(s), expected status, text each expected line holds)
CASES = [
    (
        "insert_table",
        "GRANT INSERT ON {db}.t TO {u}",
        "warn",
        ["REVOKE INSERT ON `{db}`.`t` FROM `{user}`@`%`"],
    ),
    (
        "insert_sequence_role",
        "GRANT INSERT ON {db}.s TO {r}",
        "warn",
        ["REVOKE INSERT ON `{db}`.`s` FROM `{r}`"],
    ),
    (
        "update_column",
        "GRANT UPDATE(name) ON {db}.t TO {u}",
        "warn",
        ["REVOKE UPDATE (`name`) ON `{db}`.`t`"],
    ),
    (
        "delete_history_role",
        "GRANT DELETE, DELETE HISTORY ON {db}.* TO {r}",
        "warn",
        ["REVOKE DELETE HISTORY"],
    ),
    (
        "routines",
        "GRANT CREATE ROUTINE, ALTER ROUTINE ON {db}.* TO {u}",
        "fail",
        ["REVOKE CREATE ROUTINE ON `{db}`.* FROM", "REVOKE ALTER ROUTINE ON `{db}`.* FROM"],
    ),
    ("create_view", "GRANT CREATE VIEW ON {db}.* TO {u}", "fail", ["REVOKE CREATE VIEW ON `{db}`.*"]),
    (
        "event_trigger_role",
        "GRANT EVENT, TRIGGER ON {db}.* TO {r}",
        "fail",
        [
            "through role `{r}`",
            "REVOKE EVENT ON `{db}`.* FROM `{r}`",
            "REVOKE TRIGGER ON `{db}`.* FROM `{r}`",
        ],
    ),
    (
        "temp_lock",
        "GRANT CREATE TEMPORARY TABLES, LOCK TABLES ON {db}.* TO {u}",
        "fail",
        ["REVOKE CREATE TEMPORARY TABLES ON `{db}`.*", "REVOKE LOCK TABLES ON `{db}`.*"],
    ),
    (
        "ddl_table",
        "GRANT ALTER, DROP, INDEX, REFERENCES ON {db}.t TO {u}",
        "fail",
        ["REVOKE ALTER ON `{db}`.`t`", "REVOKE DROP ON", "REVOKE INDEX ON", "REVOKE REFERENCES ON"],
    ),
    (
        "grant_option_table",
        "GRANT SELECT ON {db}.t TO {u} WITH GRANT OPTION",
        "fail",
        ["REVOKE GRANT OPTION ON `{db}`.`t` FROM `{user}`@`%`"],
    ),
    (
        "grant_option_global",
        "GRANT USAGE ON *.* TO {u} WITH GRANT OPTION",
        "fail",
        ["REVOKE GRANT OPTION ON *.*"],
    ),
    (
        "monitors_role",
        "GRANT SLAVE MONITOR, BINLOG MONITOR, REPLICATION MASTER ADMIN, FEDERATED ADMIN,"
        " BINLOG REPLAY, SET USER ON *.* TO {r}",
        "fail",
        [
            f"REVOKE {p} ON *.* FROM `{{r}}`"
            for p in (
                "SLAVE MONITOR",
                "BINLOG MONITOR",
                "REPLICATION MASTER ADMIN",
                "FEDERATED ADMIN",
                "BINLOG REPLAY",
                "SET USER",
            )
        ],
    ),
    (
        "role_admin_option",
        "GRANT {r} TO {u} WITH ADMIN OPTION",
        "fail",
        ["REVOKE ADMIN OPTION FOR `{r}` FROM `{user}`@`%`"],
    ),
    (
        "performance_schema",
        "GRANT SELECT ON performance_schema.* TO {u}",
        "fail",
        ["REVOKE SELECT ON `performance_schema`.*"],
    ),
]


def _doctor(s: Scratch) -> tuple[int, list[str]]:
    done = mcpkit_here("sql", "doctor", "--dsn", s.url)
    return done.returncode, done.stdout.splitlines()


@pytest.mark.parametrize(("grant", "status", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_careless_grant_refused_or_told_with_its_revoke(
    scratch: Scratch, grant: str, status: str, expected: list[str]
) -> None:
    scratch.run(grant)
    code, lines = _doctor(scratch)
    user = scratch.login.split("'")[1]
    for text in (e.format(db=scratch.db, r=scratch.role, user=user) for e in expected):
        prefix = "fail least privilege" if status == "fail" else "warn writable tables"
        assert any(line.startswith(prefix) and text in line for line in lines), (text, lines)
    assert code == (1 if status == "fail" else 0), lines


def test_start_up_refuses_with_one_line_each_then_serves_after_the_fixes(scratch: Scratch) -> None:
    scratch.run("GRANT CREATE VIEW, LOCK TABLES ON {db}.* TO {r}", "GRANT INSERT ON {db}.t TO {u}")
    refused = mcpkit_here("sql", "query", "--dsn", scratch.url, "SELECT 1 AS one")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    fixes = [f"REVOKE {p} ON `{scratch.db}`.* FROM `{scratch.role}`" for p in ("CREATE VIEW", "LOCK TABLES")]
    lines = [line for line in refused.stderr.splitlines() if "through role" in line]
    assert sorted(line.rsplit(": ", 1)[1] for line in lines) == fixes, refused.stderr
    scratch.run(*(f.replace("`", "") for f in fixes))
    served = mcpkit_here("sql", "query", "--dsn", scratch.url, "SELECT 1 AS one")
    assert served.returncode == 0, served.stderr
    assert f"REVOKE INSERT ON `{scratch.db}`.`t`" in served.stderr  # the write is told, not refused


@pytest.mark.serial  # a grant to PUBLIC reaches every login of the server
def test_insert_granted_to_public_on_the_database_is_told(scratch: Scratch) -> None:
    """A grant to PUBLIC (information_schema leaves it out) is read; revoked in finally."""
    try:
        scratch.run("GRANT INSERT ON {db}.* TO PUBLIC")
        code, lines = _doctor(scratch)
    finally:
        scratch.run("REVOKE INSERT ON {db}.* FROM PUBLIC")
    assert code == 0, lines
    want = f"REVOKE INSERT ON `{scratch.db}`.* FROM PUBLIC"
    assert any(line.startswith("warn writable tables") and want in line for line in lines), lines


def test_what_a_reader_needs_passes(scratch: Scratch) -> None:
    scratch.run("GRANT SELECT(id), SHOW VIEW ON {db}.t TO {r}", "GRANT EXECUTE, SHOW VIEW ON {db}.* TO {u}")
    code, lines = _doctor(scratch)
    assert code == 0, lines
    assert not any(line.startswith("fail") for line in lines), lines
    assert any(line.startswith("ok   writable tables") for line in lines), lines


def test_a_reader_whose_select_comes_through_its_default_role_passes(scratch: Scratch) -> None:
    # SHOW GRANTS then ends with `SET DEFAULT ROLE ...`, which grants nothing (red team v10 F4:
    # refused as a line mcpkit cannot read, so every role map of logins with default roles)
    scratch.run(
        "REVOKE SELECT ON {db}.* FROM {u}", "GRANT SELECT ON {db}.t TO {r}", "SET DEFAULT ROLE {r} FOR {u}"
    )
    code, lines = _doctor(scratch)
    assert code == 0 and not any(line.startswith("fail") for line in lines), lines
    served = mcpkit_here("sql", "query", "--dsn", scratch.url, "SELECT count(*) AS n FROM t")
    assert served.returncode == 0, served.stderr


def test_an_unknown_privilege_is_refused() -> None:
    found, writable = judge_grants(
        ["GRANT SELECT, TIME TRAVEL ON `d`.* TO `u`@`%`", "GRANT FLY ON *.* TO PUBLIC"], "u@%", set(), None
    )
    assert [f.fix for f in found] == [
        "REVOKE TIME TRAVEL ON `d`.* FROM `u`@`%`",
        "REVOKE FLY ON *.* FROM PUBLIC",
    ]
    assert writable == []
    found, _ = judge_grants(["GRANT SOMETHING NEW TO `u`@`%`", "GRANT X Y TO `u`@`%`"], "u@%", set(), None)
    assert [f.fix.rsplit(": ", 1)[1] for f in found] == [
        "GRANT SOMETHING NEW TO `u`@`%`",
        "GRANT X Y TO `u`@`%`",
    ]


def _as_login(s: Scratch, sql: str) -> str:
    engine = SqlEngine(s.url)
    try:
        engine.execute(sql, None, 10, 10.0, "mk-test")
    except QueryFailed as exc:
        return exc.kind
    finally:
        engine.close()
    return "ok"


def test_data_writes_are_refused_by_the_read_only_transaction(scratch: Scratch) -> None:
    """Why INSERT/UPDATE/DELETE/DELETE HISTORY are a warning, not a refusal: as the login holding
    them, each is refused inside the call's transaction, a sequence's NEXTVAL and SETVAL too."""
    scratch.run(
        "ALTER TABLE {db}.t ADD SYSTEM VERSIONING",
        "GRANT INSERT, UPDATE, DELETE, DELETE HISTORY ON {db}.* TO {u}",
    )
    for sql in (
        "INSERT INTO t VALUES (1, 'a')",
        "UPDATE t SET name = 'b'",
        "DELETE FROM t",
        "DELETE HISTORY FROM t",
        "SELECT NEXTVAL(s)",
        "SELECT SETVAL(s, 5)",
    ):
        assert _as_login(scratch, sql) == "read_only", sql


def test_a_temporary_table_in_the_read_only_transaction(scratch: Scratch) -> None:
    """MariaDB 10.11 refuses CREATE TEMPORARY TABLE in a READ ONLY transaction (1792); outside one
    the login creates and writes it, and MySQL 8 allows it inside: the privilege is refused."""
    scratch.run("GRANT CREATE TEMPORARY TABLES ON {db}.* TO {u}")
    assert _as_login(scratch, "CREATE TEMPORARY TABLE mk_tmp (a INT)") == "read_only"
    u = make_url(scratch.url)
    conn = pymysql.connect(
        host=u.host, port=u.port or 3306, user=u.username, password="", database=u.database
    )
    try:
        with conn.cursor() as c:
            c.execute("CREATE TEMPORARY TABLE mk_tmp (a INT)")
            c.execute("INSERT INTO mk_tmp VALUES (1)")
            c.execute("SELECT COUNT(*) FROM mk_tmp")
            assert c.fetchone() == (1,)
    finally:
        conn.close()


def test_strings_longer_than_the_default_sort_length_sort_right(scratch: Scratch) -> None:
    """Three 2001-character values that differ only in their last one (red team 10, F4)."""
    rows = "(SELECT CONCAT(REPEAT('a', 2000), '2') AS x UNION ALL SELECT CONCAT(REPEAT('a', 2000), '1')"
    rows += " UNION ALL SELECT CONCAT(REPEAT('a', 2000), '3')) t"
    engine = SqlEngine(scratch.url)
    try:
        ordered = engine.execute(f"SELECT RIGHT(x, 1) FROM {rows} ORDER BY x", None, 10, 10.0, "mk-test")
        top = engine.execute(
            f"SELECT RIGHT(x, 1) FROM {rows} ORDER BY x DESC LIMIT 1", None, 10, 10.0, "mk-test"
        )
        window = engine.execute(
            f"SELECT RIGHT(x, 1), ROW_NUMBER() OVER (ORDER BY x) FROM {rows} ORDER BY 2",
            None,
            10,
            10.0,
            "mk-test",
        )
    finally:
        engine.close()
    assert [r[0] for r in ordered.rows] == ["1", "2", "3"]
    assert [r[0] for r in top.rows] == ["3"]
    assert [r[0] for r in window.rows] == ["1", "2", "3"]


@pytest.mark.anyio
async def test_a_refused_grant_given_while_serving_is_refused_until_revoked(scratch: Scratch) -> None:
    """The catalog fingerprint reads `SHOW GRANTS` under each role: a column-level UPDATE is told,
    a CREATE ROUTINE granted to a role that is not enabled stops the source until revoked."""
    from tests.sql.test_sql_reverify import _code, _serving

    async with _serving(scratch.url) as ask:
        assert _code(await ask("SELECT 1 AS one")) == "OK"
        scratch.run("GRANT UPDATE(name) ON {db}.t TO {r}")
        assert _code(await ask("SELECT 1 AS one")) == "OK"
        scratch.run("GRANT CREATE ROUTINE ON {db}.* TO {r}")
        assert _code(await ask("SELECT 1 AS one")) == "SOURCE_UNVERIFIED"
        scratch.run("REVOKE CREATE ROUTINE ON {db}.* FROM {r}")
        assert _code(await ask("SELECT 1 AS one")) == "OK"


def test_long_sort_keys_still_fit_the_sort_buffer(scratch: Scratch) -> None:
    """At max_sort_length's maximum (8 MiB) MariaDB refused, with the default 2 MiB sort buffer,
    every sort on a JSON or LONGTEXT column (1038: keys x 15 over the buffer); the session's value
    leaves room for 8 such keys."""
    scratch.run(
        "CREATE TABLE {db}.docs (id INT PRIMARY KEY, body LONGTEXT, doc JSON)",
        "INSERT INTO {db}.docs SELECT seq, CONCAT('n', seq % 5), JSON_OBJECT('a', seq)"
        " FROM {db}.seq_1_to_200",
        "GRANT SELECT ON {db}.docs TO {u}",
    )
    keys = ", ".join(["body", "doc", "CAST(body AS BINARY)"] + [f"CONCAT(body, '{c}')" for c in "vwxyz"])
    engine = SqlEngine(scratch.url)
    try:
        for sql in (
            "SELECT id FROM docs ORDER BY doc",
            f"SELECT id FROM docs ORDER BY {keys}",
            "SELECT body, GROUP_CONCAT(id ORDER BY doc) AS g FROM docs GROUP BY body ORDER BY 2, body",
        ):
            assert len(engine.execute(sql, None, 500, 10.0, "mk-test").rows) > 0, sql
    finally:
        engine.close()
