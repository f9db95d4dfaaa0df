"""Non-interference on PostgreSQL and MariaDB: twin databases that differ only in masked values.

Each engine gets two databases created for the test (same CRM rows, other emails and SSNs in the
second) and one reader identity that holds column privileges on the unmasked columns only, as
`serve --mask` requires. Every route of the adversarial masking corpus, the alias column list,
SQL carried in strings (crosstab, connectby, xpath_table, query_to_xml), the views of other
sessions' activity (a canary session of the same identity ran a query holding a masked literal)
and `SELECT *` must answer identically on both twins:

- through the server's path (admission, masking analysis, database);
- with the analysis off (admission only), and with admission off too (the database alone): the
  column privileges must keep the masked values out whatever SQL arrives. The database alone
  does not hide other sessions' SQL text (admission refuses those views) and MariaDB 10.11 does not
  check privileges on NATURAL/USING join columns (the analysis refuses every such join): both are
  shown to differ without their guard and to be refused with it.

The databases are fingerprinted before and after (data, the reader's grants and settings) with
one cluster-wide check (superusers / global privileges).
"""

from __future__ import annotations

import hashlib
import random
import secrets as tokens
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pymysql
import pytest
from hypothesis import HealthCheck, given, settings
from sqlalchemy.engine import make_url
from sqlglot import exp

from mcpkit.errors import Refused
from mcpkit.sql.admission import Admitted
from mcpkit.sql.assemble import enforce_masks
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout
from mcpkit.sql.masking import MASKED, KnownSchema, MaskPolicy, reflect_schema
from mcpkit.sql.service import Masking, SqlService
from tests.sql.sql_support import READER_CONNECTIONS, mysql_admin, pg_admin, pg_need_extensions
from tests.sql_governance.support import CRM_DDL, crm_rows, load_corpus, masked_queries, secrets

POLICY = MaskPolicy.of(["customers.email", "*.ssn"])
MASKED_COLUMNS = {"customers": frozenset({"email", "ssn"}), "orders": frozenset({"ssn"})}
GRANTS = {"customers": ("id", "name", "region", "tier"), "orders": ("id", "customer_id", "amount", "email")}


def _scrambled() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The CRM rows with other masked values: other lengths, duplicates, other first letters."""
    customers, orders = crm_rows()
    rng = random.Random(66)  # deterministic
    out = []
    for cid, name, _, _, region, tier in customers:
        email = rng.choice(["z@q.io", "zz-top@example.net", f"{rng.randint(0, 9)}@x.y"])
        ssn = rng.choice(["000-00-0000", "999-99-9999", f"{rng.randint(100, 999)}"])
        out.append((cid, name, email, ssn, region, tier))
    return out, [(*o[:4], f"{rng.randint(100, 999)}") for o in orders]


@dataclass
class Twin:
    """One twin: the reader's URL, the canary literal (a masked value of this twin), its services."""

    url: str
    admin_url: str
    literal: str
    services: dict[str, SqlService] = field(default_factory=dict)

    def close(self) -> None:
        for s in self.services.values():
            s.engine.close()  # type: ignore[attr-defined]


def _passthrough(sql: str, dialect: str, **_: Any) -> Admitted:
    return Admitted(sql=sql, tree=exp.Select())


def _services(twin: Twin) -> None:
    """Three ways to the database: the server's path, admission only, and the database alone."""
    full = SqlEngine(twin.url)
    enforce_masks(full, MASKED_COLUMNS)  # the identity starts clean: column privileges only
    mapping = reflect_schema(full.sa_engine, policy=POLICY)
    twin.services["full"] = SqlService(
        full, max_rows=500, timeout_s=20.0, masking=Masking(POLICY, KnownSchema(mapping, full.dialect))
    )
    twin.services["admission"] = SqlService(SqlEngine(twin.url), max_rows=500, timeout_s=20.0)
    raw = SqlService(SqlEngine(twin.url), max_rows=500, timeout_s=20.0)
    raw._admit = _passthrough
    twin.services["engine"] = raw


def _answer(service: SqlService, sql: str) -> object:
    try:
        result, _ = service.query(sql, call_id="twin", max_rows=500)
    except Refused:
        return "refused"
    except QueryFailed as exc:
        return f"failed {exc.kind}"
    except QueryTimeout:
        return "timeout"
    return (tuple(result.columns), tuple(tuple(r) for r in result.rows), result.truncated)


@dataclass
class Twins:
    dialect: str
    a: Twin
    b: Twin
    fingerprint: Callable[[], dict[str, str]]
    corpus_schema: Callable[[Twin], str]
    string_sql: tuple[str, ...] = ()
    activity: tuple[str, ...] = ()
    engine_gaps: tuple[str, ...] = ()

    def routes(self, twin: Twin) -> list[str]:
        _, attacks, legit = load_corpus()
        corpus = [c.text(self.corpus_schema(twin)) for c in [*attacks, *legit] if self.dialect in c.dialects]
        return [*corpus, *STAR_ROUTES, *self.string_sql]


STAR_ROUTES = (
    "SELECT * FROM customers ORDER BY id",
    "SELECT c.* FROM customers c WHERE c.tier = 2 ORDER BY c.id",
    "SELECT * FROM orders ORDER BY id LIMIT 20",
    "SELECT * FROM (SELECT * FROM customers) t ORDER BY id",
    "SELECT c.*, o.amount FROM customers c JOIN orders o ON o.customer_id = c.id ORDER BY o.id",
)


def _digest(rows: Any) -> str:
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:16]


# --- PostgreSQL -----------------------------------------------------------------------------------

PG_STRING_SQL = (
    "SELECT * FROM crosstab('SELECT name::text, ''e''::text, email::text FROM customers ORDER BY 1')"
    " AS t(n text, e text)",
    "SELECT * FROM crosstab('SELECT name::text, ''e''::text, ''x''::text FROM customers"
    " WHERE email LIKE ''a%'' ORDER BY 1') AS t(n text, e text)",
    "SELECT * FROM connectby('customers', 'email', 'ssn', 'x', 0) AS t(k text, p text, l int)",
    "SELECT * FROM connectby('customers', 'id::text', 'ssn', '1', 0) AS t(k text, p text, l int)",
    "SELECT * FROM xpath_table('id', 'email', 'customers', '/a', 'true') AS x(id int, a text)",
    "SELECT query_to_xml('SELECT email FROM customers', true, false, '') AS x",
    "SELECT query_to_xml('SELECT id FROM customers WHERE ssn LIKE ''5%''', true, false, '') AS x",
    "SELECT c.name AS leaked FROM customers AS c(id, nm, name)",
    "SELECT count(*) FROM customers AS c(id, nm, name) WHERE name LIKE 'a%'",
)

PG_ACTIVITY = (
    "SELECT query FROM pg_stat_activity WHERE datname = current_database() ORDER BY query",
    "SELECT s.query FROM pg_stat_get_activity(NULL) AS s"
    " WHERE s.datid = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY 1",
    "SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE query LIKE '%@%'",
)


def _pg_fill(
    admin: str, customers: list[tuple[Any, ...]], orders: list[tuple[Any, ...]], reader: str
) -> None:
    with pg_admin(admin) as c:
        pg_need_extensions(c, "tablefunc", "xml2")
        c.execute("CREATE EXTENSION tablefunc")
        c.execute("CREATE EXTENSION xml2")
        c.execute("CREATE SCHEMA crm")
        for ddl in CRM_DDL:
            c.execute(ddl.format(s="crm."))
        with c.cursor() as cur:
            cur.executemany("INSERT INTO crm.customers VALUES (%s, %s, %s, %s, %s, %s)", customers)
            cur.executemany("INSERT INTO crm.orders VALUES (%s, %s, %s, %s, %s)", orders)
        c.execute("ANALYZE crm.customers")
        c.execute(f"GRANT USAGE ON SCHEMA crm TO {reader}")
        for table, columns in GRANTS.items():
            c.execute(f"GRANT SELECT ({', '.join(columns)}) ON crm.{table} TO {reader}")


@pytest.fixture(scope="module")
def pg_twins(pg_url: str) -> Iterator[Twins]:
    tag = tokens.token_hex(4)
    reader, dbs = f"mk_twinr_{tag}", (f"mk_twin_{tag}_a", f"mk_twin_{tag}_b")
    canaries: list[psycopg.Connection[Any]] = []
    twins: list[Twin] = []
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE ROLE {reader} LOGIN")
        for db in dbs:
            c.execute(f"CREATE DATABASE {db}")
            c.execute(f"ALTER ROLE {reader} IN DATABASE {db} SET search_path = crm, public")
    try:
        for db, rows in zip(dbs, (crm_rows(), _scrambled()), strict=True):
            admin = make_url(pg_url).set(database=db).render_as_string(hide_password=False)
            _pg_fill(admin, *rows, reader)
            url = make_url(admin).set(username=reader, password=None).render_as_string(False)
            literal = rows[0][0][2]
            # The application's own session (same identity) ran a query with a masked value in it.
            canary = psycopg.connect(
                make_url(url).set(drivername="postgresql").render_as_string(False), autocommit=True
            )
            canary.execute(f"SELECT count(*) FROM customers WHERE name <> '{literal}'").fetchall()
            canaries.append(canary)
            twin = Twin(url, admin, literal)
            _services(twin)
            twins.append(twin)

        def fingerprint() -> dict[str, str]:
            out = {}
            with pg_admin(pg_url) as c:
                out["superusers"] = _digest(
                    c.execute("SELECT rolname FROM pg_roles WHERE rolsuper ORDER BY 1").fetchall()
                )
                out["reader"] = _digest(
                    c.execute(
                        "SELECT r.rolsuper, r.rolcreaterole, r.rolbypassrls, r.rolconfig::text,"
                        " (SELECT array_agg(roleid ORDER BY roleid) FROM pg_auth_members"
                        "  WHERE member = r.oid),"
                        " (SELECT array_agg(setconfig::text ORDER BY setconfig::text) FROM pg_db_role_setting"
                        "  WHERE setrole = r.oid)"
                        " FROM pg_roles r WHERE rolname = %s",
                        [reader],
                    ).fetchall()
                )
            for twin in twins:
                with pg_admin(twin.admin_url) as c:
                    for table in ("customers", "orders"):
                        out[f"{twin.literal}:{table}"] = _digest(
                            c.execute(f"SELECT t::text FROM crm.{table} t ORDER BY 1").fetchall()
                        )
                    out[f"{twin.literal}:acl"] = _digest(
                        c.execute(
                            "SELECT attrelid::regclass::text, attname, attacl::text FROM pg_attribute"
                            " WHERE attrelid IN ('crm.customers'::regclass, 'crm.orders'::regclass)"
                            " ORDER BY 1, 2"
                        ).fetchall()
                    )
                    out[f"{twin.literal}:objects"] = _digest(
                        c.execute(
                            "SELECT oid FROM pg_class WHERE relnamespace = 'crm'::regnamespace ORDER BY 1"
                        ).fetchall()
                    )
            return out

        yield Twins(
            "postgres",
            twins[0],
            twins[1],
            fingerprint,
            lambda _twin: "crm",
            string_sql=PG_STRING_SQL,
            activity=PG_ACTIVITY,
        )
    finally:
        for twin in twins:
            twin.close()
        for canary in canaries:
            canary.close()
        with pg_admin(pg_url) as c:
            for db in dbs:
                c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            c.execute(f"DROP ROLE IF EXISTS {reader}")


# --- MariaDB --------------------------------------------------------------------------------------

MYSQL_ACTIVITY = (
    "SELECT info FROM information_schema.PROCESSLIST WHERE db = DATABASE() AND info LIKE '%SLEEP(%'",
    "SELECT info FROM information_schema.PROCESSLIST ORDER BY info",
    "SELECT count(*) FROM information_schema.PROCESSLIST WHERE info LIKE '%@%'",
    "SELECT sql_text FROM performance_schema.events_statements_current",
)


def _mysql_gaps(literal: str) -> tuple[str, ...]:
    # MariaDB 10.11 joins on a column the account may not read when the join names it implicitly.
    return (
        f"SELECT count(*) AS n FROM customers NATURAL JOIN (SELECT '{literal}' AS email) x",
        f"SELECT count(*) AS n FROM customers JOIN (SELECT '{literal}' AS email) x USING (email)",
    )


class _Sleeper:
    """The application's own connection (same account), running a query with a masked literal."""

    def __init__(self, url: str, literal: str) -> None:
        u = make_url(url)
        self.conn = pymysql.connect(host=u.host, port=u.port or 3306, user=u.username, database=u.database)
        with self.conn.cursor() as c:
            c.execute("SELECT CONNECTION_ID()")
            self.id = int(c.fetchone()[0])  # type: ignore[index]
        self.thread = threading.Thread(target=self._run, args=(literal,), daemon=True)
        self.thread.start()

    def _run(self, literal: str) -> None:
        try:
            with self.conn.cursor() as c:
                c.execute(f"SELECT SLEEP(600) AS s, '{literal}' AS l")
        except pymysql.Error:
            pass

    def stop(self, admin: pymysql.Connection) -> None:  # type: ignore[type-arg]
        with admin.cursor() as c:
            c.execute(f"KILL QUERY {self.id}")
        self.thread.join(10)
        self.conn.close()


@pytest.fixture(scope="module")
def mysql_twins(mysql_url: str) -> Iterator[Twins]:
    tag = tokens.token_hex(4)
    user, dbs = f"mk_twinr_{tag}", (f"mk_twin_{tag}_a", f"mk_twin_{tag}_b")
    admin = mysql_admin(mysql_url)
    twins: list[Twin] = []
    sleepers: list[_Sleeper] = []
    with admin.cursor() as c:
        c.execute(f"CREATE USER '{user}'@'%' WITH MAX_USER_CONNECTIONS {READER_CONNECTIONS}")
    try:
        for db, (customers, orders) in zip(dbs, (crm_rows(), _scrambled()), strict=True):
            with admin.cursor() as c:
                c.execute(f"CREATE DATABASE {db}")
                for ddl in CRM_DDL:
                    c.execute(ddl.format(s=f"{db}."))
                c.executemany(f"INSERT INTO {db}.customers VALUES (%s, %s, %s, %s, %s, %s)", customers)
                c.executemany(f"INSERT INTO {db}.orders VALUES (%s, %s, %s, %s, %s)", orders)
                for table, columns in GRANTS.items():
                    c.execute(f"GRANT SELECT ({', '.join(columns)}) ON {db}.{table} TO '{user}'@'%'")
            url = make_url(mysql_url).set(username=user, password=None, database=db).render_as_string(False)
            twin = Twin(url, mysql_url, customers[0][2])
            _services(twin)
            twins.append(twin)
            sleepers.append(_Sleeper(url, twin.literal))

        def fingerprint() -> dict[str, str]:
            out = {}
            with admin.cursor() as c:
                c.execute(
                    "SELECT User, Host FROM mysql.global_priv"
                    " WHERE JSON_VALUE(Priv, '$.access') <> '0' ORDER BY 1, 2"
                )
                out["privileged_accounts"] = _digest(c.fetchall())
                c.execute("SHOW GRANTS FOR %s@'%%'", [user])
                out["reader_grants"] = _digest(sorted(c.fetchall()))
                for db in dbs:
                    c.execute(f"CHECKSUM TABLE {db}.customers, {db}.orders EXTENDED")
                    out[f"{db}:data"] = _digest(c.fetchall())
                    c.execute(f"SHOW FULL TABLES FROM {db}")
                    out[f"{db}:tables"] = _digest(sorted(c.fetchall()))
            return out

        yield Twins(
            "mysql",
            twins[0],
            twins[1],
            fingerprint,
            lambda twin: str(make_url(twin.url).database),
            activity=MYSQL_ACTIVITY,
            engine_gaps=_mysql_gaps(twins[0].literal),
        )
    finally:
        for sleeper in sleepers:
            sleeper.stop(admin)
        for twin in twins:
            twin.close()
        with admin.cursor() as c:
            for db in dbs:
                c.execute(f"DROP DATABASE IF EXISTS {db}")
            c.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        admin.close()


TWINS = [
    pytest.param("pg_twins", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mysql_twins", id="mysql", marks=pytest.mark.mysql),
]


@pytest.fixture(params=TWINS)
def twins(request: pytest.FixtureRequest) -> Twins:
    found: Twins = request.getfixturevalue(request.param)
    return found


# --- the properties -------------------------------------------------------------------------------


def _compare(
    twins: Twins, path: str, routes_a: list[str], routes_b: list[str]
) -> list[tuple[str, object, object]]:
    a, b = twins.a.services[path], twins.b.services[path]
    return [(x, _answer(a, x), _answer(b, y)) for x, y in zip(routes_a, routes_b, strict=True)]


def test_the_twins_really_differ(twins: Twins) -> None:
    # Read as the administrator: the masked values differ, so an answer that depends on them shows.
    sql = "SELECT count(*) FROM {s}customers WHERE email LIKE 'a%' OR ssn LIKE '5%'"
    counts = []
    for twin in (twins.a, twins.b):
        if twins.dialect == "postgres":
            with pg_admin(twin.admin_url) as c:
                counts.append(c.execute(sql.format(s="crm.")).fetchone())
        else:
            admin = mysql_admin(twin.admin_url)
            with admin.cursor() as c:
                c.execute(sql.format(s=twins.corpus_schema(twin) + "."))
                counts.append(c.fetchone())
            admin.close()
    assert counts[0] != counts[1]


@pytest.mark.parametrize("path", ["full", "admission", "engine"])
def test_every_route_answers_the_twins_alike(twins: Twins, path: str) -> None:
    before = twins.fingerprint()
    routes_a, routes_b = twins.routes(twins.a), twins.routes(twins.b)
    assert len(routes_a) > (120 if twins.dialect == "postgres" else 100)
    answers = _compare(twins, path, routes_a, routes_b)
    differing = [sql for sql, x, y in answers if x != y]
    if path != "full" and twins.dialect == "mysql":
        # MariaDB does not check the privileges of NATURAL/USING join columns (see engine_gaps)
        gaps = [sql for sql in differing if "NATURAL JOIN" in sql.upper() or "USING (" in sql.upper()]
        for sql in gaps:
            assert _answer(twins.a.services["full"], sql) == "refused", sql
        differing = [sql for sql in differing if sql not in gaps]
    if path != "full":
        # The scan-order class (test_masking_order.py): the database alone follows its scan order,
        # which can differ between the twins; the analysis refuses or orders these.
        _, attacks, _ = load_corpus()
        scan_order = {c.text(twins.corpus_schema(twins.a)) for c in attacks if c.name.startswith("order_")}
        for sql in [sql for sql in differing if sql in scan_order]:
            assert _answer(twins.a.services["full"], sql) == "refused", sql
            differing.remove(sql)
    assert differing == [], differing
    answered = [x for _, x, _ in answers if isinstance(x, tuple)]
    for columns, rows, _ in answered:
        texts = [str(c) for r in rows for c in r] + list(columns)
        assert not [s for s in secrets() if any(s in t for t in texts)]
    outcome = {sql: x for sql, x, _ in answers}
    if path == "engine":  # the database itself refuses the masked columns, `*` and SQL in strings
        for sql in (*STAR_ROUTES[:3], *twins.string_sql[:-2]):
            assert outcome[sql] == "failed permission", (sql, outcome[sql])
    if path == "full":
        # The server's path answers most routes: `*`, selections of masked columns as <masked>.
        stars = [x for sql, x, _ in answers if sql in STAR_ROUTES]
        assert all(isinstance(x, tuple) and any(MASKED in r for r in x[1]) for x in stars), stars
        assert len(answered) > 40
    assert twins.fingerprint() == before


def test_other_sessions_sql_text_is_refused_not_shown(twins: Twins) -> None:
    # The database alone shows the identity's own sessions, masked literal included: the twins
    # differ there. Admission refuses those views on every path that serves the agent.
    raw = _compare(twins, "engine", list(twins.activity), list(twins.activity))
    assert any(x != y for _, x, y in raw), raw
    for path in ("full", "admission"):
        for sql, x, y in _compare(twins, path, list(twins.activity), list(twins.activity)):
            assert x == y == "refused", (path, sql, x, y)


def test_engine_gaps_are_refused_by_the_analysis(twins: Twins) -> None:
    if not twins.engine_gaps:
        pytest.skip("this engine checks the privileges of every join column")
    gaps = list(twins.engine_gaps)
    raw = _compare(twins, "engine", gaps, gaps)
    assert all(x != y for _, x, y in raw), raw  # the database alone: a membership oracle
    for sql, x, y in _compare(twins, "full", gaps, gaps):
        assert x == y == "refused", sql


@pytest.mark.parametrize(
    "dialect",
    [pytest.param("postgres", marks=pytest.mark.postgres), pytest.param("mysql", marks=pytest.mark.mysql)],
)
def test_generated_queries_answer_the_twins_alike(request: pytest.FixtureRequest, dialect: str) -> None:
    pair: Twins = request.getfixturevalue("pg_twins" if dialect == "postgres" else "mysql_twins")
    outcomes: list[str] = []

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
    @given(sql=masked_queries(dialect))
    def check(sql: str) -> None:
        for path in ("full", "engine"):
            x, y = _answer(pair.a.services[path], sql), _answer(pair.b.services[path], sql)
            assert x == y, (path, sql)
            if path == "full":
                outcomes.append(x if isinstance(x, str) else "answered")

    check()
    assert "answered" in outcomes and "refused" in outcomes
