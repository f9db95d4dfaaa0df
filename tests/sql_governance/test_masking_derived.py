"""Masked values under other names, from the red team's second pass (issue 11, breaks 7 to 10).

A generated column computed from a masked column, a partition or inheritance child of a masked
table, a full-text index built over a view of a masked table, and the order an index on a masked
column gives an unordered result: each carries the masked value (or its order) out. Each is shown
twice where it applies: through the server's path (start-up derivation, analysis, database), and
with the database alone (no analysis). The database's state is fingerprinted around each attack.
"""

from __future__ import annotations

import secrets as tokens
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from mcpkit.errors import Refused
from mcpkit.sql.assemble import derive_masks, enforce_masks
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, SqlConfigError
from mcpkit.sql.masking import MASKED, KnownSchema, MaskPolicy, reflect_schema, reflect_views
from mcpkit.sql.service import Masking, SqlService
from tests.helpers import run_mcpkit
from tests.sql.sql_support import (
    changed,
    mysql_admin,
    mysql_scratch,
    mysql_snapshot,
    pg_admin,
    pg_snapshot,
    sqlite_snapshot,
)

# Fingerprints the whole server (roles, databases, settings): runs after the parallel part.
pytestmark = pytest.mark.serial

SECRET = "secret-corp"
EMAILS = {1: "zed@x.example", 2: "adam@x.example", 3: "mia@x.example", 4: "bob@x.example", 5: "eve@x.example"}


def _served(url: str, masks: list[str]) -> SqlService:
    """The service `serve --mask` builds (assemble.py): derived masks, the engine's check, analysis."""
    engine = SqlEngine(url)
    policy = MaskPolicy.of(masks)
    mapping = reflect_schema(engine.sa_engine, policy=policy)
    policy, masked = derive_masks(engine, policy, policy.masked_tables(mapping))
    enforce_masks(engine, masked)
    withheld = engine.profile.withheld_relations()
    return SqlService(
        engine,
        max_rows=100,
        timeout_s=10.0,
        masking=Masking(
            policy,
            KnownSchema(mapping, engine.dialect, withheld=withheld, views=reflect_views(engine.sa_engine)),
        ),
    )


def _alone(url: str, masks: list[str]) -> SqlService:
    """The database alone: the same start-up enforcement, no analysis of the query."""
    service = _served(url, masks)
    service.masking = None
    return service


def _answer(service: SqlService, sql: str) -> str:
    try:
        result, _ = service.query(sql, call_id="derived", max_rows=100)
    except Refused:
        return "refused"
    except QueryFailed as exc:
        return f"failed {exc.kind}"
    return repr([list(r) for r in result.rows])


# --- SQLite -------------------------------------------------------------------------------------


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Path:
    path = tmp_path / "c.db"
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, email TEXT,
              email_lower TEXT GENERATED ALWAYS AS (lower(email)) VIRTUAL,
              domain TEXT GENERATED ALWAYS AS (substr(email_lower, instr(email_lower, '@'))) STORED,
              name_len INT GENERATED ALWAYS AS (length(name)) VIRTUAL);
            CREATE INDEX customers_email ON customers (email);
            CREATE VIEW v_customers AS SELECT id, name, email FROM customers;
            CREATE VIRTUAL TABLE cust_search
              USING fts5(name, email, content='v_customers', content_rowid='id');
            CREATE VIRTUAL TABLE cust_vocab USING fts5vocab(cust_search, 'row');
            """
        )
        db.executemany(
            "INSERT INTO customers (id, name, email) VALUES (?, ?, ?)",
            [(i, f"n{i}", e.replace("x.example", f"{SECRET}.example")) for i, e in EMAILS.items()],
        )
        db.execute("INSERT INTO cust_search(cust_search) VALUES ('rebuild')")
    db.close()
    return path


@pytest.mark.parametrize("make", [_served, _alone], ids=["server", "database-alone"])
def test_sqlite_generated_columns_of_a_masked_column_are_masked(sqlite_db: Path, make: object) -> None:
    before = sqlite_snapshot(sqlite_db.parent)
    service = make(f"sqlite:///{sqlite_db}", ["customers.email"])  # type: ignore[operator]
    try:
        for sql in (
            "SELECT id, email_lower FROM customers ORDER BY id",
            "SELECT id, domain FROM customers ORDER BY id",
            "SELECT upper(email_lower) AS e FROM customers",
        ):
            answer = _answer(service, sql)
            assert SECRET not in answer, (sql, answer)
            assert answer == "refused" or "None" in answer or MASKED in answer, (sql, answer)
        # A generated column that reads no masked column stays readable.
        assert _answer(service, "SELECT name_len FROM customers WHERE id = 1") == "[[2]]"
        # Filtering on it cannot tell the values apart either.
        answer = _answer(service, f"SELECT id FROM customers WHERE email_lower LIKE '%{SECRET}%'")
        assert answer in ("refused", "[]"), answer
    finally:
        service.engine.close()  # type: ignore[attr-defined]
    assert changed(before, sqlite_snapshot(sqlite_db.parent)) == []


@pytest.mark.parametrize("make", [_served, _alone], ids=["server", "database-alone"])
def test_sqlite_fts_over_a_view_of_a_masked_table_is_withheld(sqlite_db: Path, make: object) -> None:
    before = sqlite_snapshot(sqlite_db.parent)
    service = make(f"sqlite:///{sqlite_db}", ["customers.email"])  # type: ignore[operator]
    try:
        for sql in (
            "SELECT rowid FROM cust_search WHERE cust_search MATCH 'email:secret'",
            "SELECT id, hex(block) AS h FROM cust_search_data WHERE id > 100",
            "SELECT * FROM cust_search_idx",
        ):
            answer = _answer(service, sql)
            assert answer == "refused" or answer.startswith("failed"), (sql, answer)
        # The view itself is read through the authorizer: the e-mail is NULL there.
        assert SECRET not in _answer(service, "SELECT email FROM v_customers")
        # fts5vocab lists the index's terms: refused as a read the account may not make, not a write.
        answer = _answer(service, "SELECT term FROM cust_vocab")
        assert answer in ("refused", "failed permission"), answer
    finally:
        service.engine.close()  # type: ignore[attr-defined]
    assert changed(before, sqlite_snapshot(sqlite_db.parent)) == []


def test_sqlite_unordered_results_do_not_follow_an_index_on_a_masked_column(sqlite_db: Path) -> None:
    by_email = [i for i, _ in sorted(EMAILS.items(), key=lambda kv: kv[1])]
    plain = sqlite3.connect(sqlite_db)
    try:  # what the engine does on its own: the covering index on email orders the result
        assert [
            r[0] for r in plain.execute("SELECT id FROM customers INDEXED BY customers_email")
        ] == by_email
    finally:
        plain.close()
    before = sqlite_snapshot(sqlite_db.parent)
    service = _served(f"sqlite:///{sqlite_db}", ["customers.email"])
    try:
        assert _answer(service, "SELECT id FROM customers") == repr([[i] for i in sorted(EMAILS)])
        assert _answer(service, "SELECT id FROM customers INDEXED BY customers_email LIMIT 2") in (
            "[[1], [2]]",
            "refused",
        )
        assert _answer(service, "SELECT n FROM (SELECT id AS n FROM customers LIMIT 2)") == "[[1], [2]]"
    finally:
        service.engine.close()  # type: ignore[attr-defined]
    assert changed(before, sqlite_snapshot(sqlite_db.parent)) == []


# --- SQLite: views over a masked column (red team rt15my F8) ------------------------------------

VIEWS = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, email TEXT);
CREATE VIEW v_customers AS SELECT id, name, email FROM customers;
CREATE VIEW v_contact AS SELECT id, upper(email) AS contact, name FROM customers;
CREATE VIEW v_star AS SELECT * FROM customers;
CREATE VIEW v_renamed(i, e) AS SELECT id, email FROM customers;
CREATE VIEW v_nested AS SELECT id, contact AS again FROM v_contact;
CREATE VIEW v_names AS SELECT id, name FROM customers;
CREATE VIEW v_filter AS SELECT id, name FROM customers WHERE email LIKE 'zed%';
CREATE VIEW v_sorted AS SELECT id FROM customers ORDER BY email LIMIT 2;
CREATE VIEW v_over_filter AS SELECT name FROM v_filter;
CREATE INDEX ix_email ON customers (email);
CREATE VIEW v_first AS SELECT id FROM customers LIMIT 2;
CREATE VIEW v_numbered AS SELECT id, row_number() OVER () AS rn FROM customers;
CREATE VIEW v_scalar AS SELECT (SELECT id FROM customers) AS first_id;
CREATE VIEW v_peer AS SELECT id, (SELECT p.id FROM customers p WHERE p.name <> q.name) AS o FROM customers q;
CREATE VIEW v_where_scalar AS SELECT id FROM customers WHERE id = (SELECT id FROM customers WHERE name > '');
CREATE VIEW v_case AS SELECT CASE WHEN (SELECT id FROM customers) = 1 THEN 'y' ELSE 'n' END AS a;
CREATE VIEW v_count AS SELECT (SELECT count(*) FROM customers) AS n;
ANALYZE;
CREATE VIEW v_db AS SELECT * FROM pragma_database_list;
CREATE VIEW v_schema AS SELECT name, sql FROM sqlite_master;
CREATE VIEW v_stat AS SELECT * FROM sqlite_stat1;
"""
# View -> its id and the column computed from customers.email, read like `customers.id, email`.
MASKED_VIEWS = {
    "v_customers": "id, email",
    "v_contact": "id, contact",
    "v_star": "id, email",
    "v_renamed": "i, e",
    "v_nested": "id, again",
}
# Views whose rows depend on the masked value: computed on NULL they would answer wrong rows.
# red team my18 F6: v_first and v_numbered never name email, but SQLite scans the covering index
# on it, so the two rows picked and the numbering followed the masked e-mails' order.
# red team rt19lite F4, rt19mask F7: a scalar subquery answers the first row of that scan (the
# smallest e-mail's id); F6: views over a never-readable pragma (the file's path), the schema (every
# CREATE statement's literals) and statistics (the masked column's distinct count).
WITHHELD_VIEWS = (
    *("v_filter", "v_sorted", "v_over_filter", "v_first", "v_numbered"),
    *("v_scalar", "v_peer", "v_where_scalar", "v_case", "v_db", "v_schema", "v_stat"),
)


@pytest.fixture
def sqlite_views(tmp_path: Path) -> Path:
    path = tmp_path / "views.db"
    with sqlite3.connect(path) as db:
        db.executescript(VIEWS)
        db.executemany(
            "INSERT INTO customers (id, name, email) VALUES (?, ?, ?)",
            [(i, f"n{i}", e.replace("x.example", f"{SECRET}.example")) for i, e in EMAILS.items()],
        )
    db.close()
    return path


def test_sqlite_a_masked_column_read_through_a_view_is_masked_like_the_table(sqlite_views: Path) -> None:
    before = sqlite_snapshot(sqlite_views.parent)
    service = _served(f"sqlite:///{sqlite_views}", ["customers.email"])
    try:
        table = _answer(service, "SELECT id, email FROM customers ORDER BY id")
        assert table == repr([[i, MASKED] for i in sorted(EMAILS)])
        for view, columns in MASKED_VIEWS.items():
            sql = f"SELECT {columns} FROM {view} ORDER BY 1"
            assert _answer(service, sql) == table, sql  # the marker, never NULL, never the value
        star = _answer(service, "SELECT * FROM v_customers ORDER BY id")
        assert star == repr([[i, f"n{i}", MASKED] for i in sorted(EMAILS)])
        # The view's other columns stay readable; a view that reads no masked column is untouched.
        assert _answer(service, "SELECT name FROM v_contact WHERE id = 1") == "[['n1']]"
        assert _answer(service, "SELECT name FROM v_names WHERE id = 2") == "[['n2']]"
        # A masked view column decides nothing either (computed on NULL it would count 5).
        assert _answer(service, "SELECT count(*) FROM v_customers WHERE email IS NULL") == "refused"
        for view in WITHHELD_VIEWS:
            with pytest.raises(Refused) as refused:
                service.query(f"SELECT * FROM {view}", call_id="view", max_rows=10)
            assert str(refused.value).startswith("This query reads a view whose rows depend on a masked")
    finally:
        service.engine.close()  # type: ignore[attr-defined]
    assert changed(before, sqlite_snapshot(sqlite_views.parent)) == []


def test_sqlite_a_view_over_a_masked_column_with_the_database_alone(sqlite_views: Path) -> None:
    before = sqlite_snapshot(sqlite_views.parent)
    service = _alone(f"sqlite:///{sqlite_views}", ["customers.email"])
    try:
        for view, columns in MASKED_VIEWS.items():  # the authorizer alone can only give NULL
            answer = _answer(service, f"SELECT {columns} FROM {view} ORDER BY 1")
            assert SECRET not in answer and "@" not in answer, (view, answer)
            assert answer == repr([[i, None] for i in sorted(EMAILS)]), (view, answer)
        for view in WITHHELD_VIEWS:  # every read through it is refused, counts too
            for sql in (f"SELECT * FROM {view}", f"SELECT count(*) FROM {view}"):
                assert _answer(service, sql) == "failed permission", sql
        assert _answer(service, "SELECT name FROM v_names WHERE id = 2") == "[['n2']]"
        assert _answer(service, "SELECT n FROM v_count") == "[[5]]"  # one row of an aggregate
    finally:
        service.engine.close()  # type: ignore[attr-defined]
    assert changed(before, sqlite_snapshot(sqlite_views.parent)) == []


def test_sqlite_a_view_sqlite_cannot_compile_is_refused_not_a_crash(sqlite_views: Path) -> None:
    # A view over a dropped table (SQLite keeps it): start-up with masks died with a traceback in
    # reflection (red team rt19lite F5); now it serves, and calls naming the view are refused.
    with closing(sqlite3.connect(sqlite_views)) as db:
        db.executescript("CREATE TABLE gone (a); CREATE VIEW v_stale AS SELECT a FROM gone; DROP TABLE gone;")
    service = _served(f"sqlite:///{sqlite_views}", ["customers.email"])
    try:
        assert _answer(service, "SELECT name FROM v_names WHERE id = 2") == "[['n2']]"
        assert _answer(service, "SELECT * FROM v_stale") == "refused"
    finally:
        service.engine.close()  # type: ignore[attr-defined]


def test_sqlite_the_file_path_is_never_read_through_a_view_even_without_masks(sqlite_views: Path) -> None:
    service = _alone(f"sqlite:///{sqlite_views}", [])
    try:
        assert _answer(service, "SELECT * FROM v_db") == "failed permission"
        assert _answer(service, "SELECT count(*) FROM v_schema") != "failed permission"  # no masks
    finally:
        service.engine.close()  # type: ignore[attr-defined]


# --- MariaDB: the index order --------------------------------------------------------------------


@pytest.fixture
def maria_cust(mysql_url: str) -> Iterator[tuple[str, str, str]]:
    with mysql_scratch(mysql_url, "io") as scratch:
        with scratch.admin.cursor() as c:
            db = scratch.db
            c.execute(
                f"CREATE TABLE {db}.customers (id INT PRIMARY KEY, name VARCHAR(20), email VARCHAR(50),"
                " KEY (email)) ENGINE=InnoDB"
            )
            for i, e in EMAILS.items():
                c.execute(f"INSERT INTO {db}.customers VALUES (%s, %s, %s)", (i, f"n{i}", e))
            c.execute(f"GRANT SELECT (id, name) ON {db}.customers TO '{scratch.reader}'@'%'")
        yield scratch.admin_url, scratch.reader_url, db


@pytest.mark.mysql
def test_mariadb_unordered_results_do_not_follow_an_index_on_a_masked_column(
    maria_cust: tuple[str, str, str], tmp_path: Path
) -> None:
    admin_url, url, db = maria_cust
    before = mysql_snapshot(admin_url, db, tmp_path)
    service = _served(url, ["customers.email"])
    try:
        assert _answer(service, "SELECT id FROM customers") == repr([[i] for i in sorted(EMAILS)])
        assert _answer(service, "SELECT id FROM customers LIMIT 2") == "[[1], [2]]"
        # An order-sensitive aggregate is ordered by its own values, not by the index scan.
        assert _answer(service, "SELECT GROUP_CONCAT(id) AS g FROM customers") == "[['1,2,3,4,5']]"
    finally:
        service.engine.close()  # type: ignore[attr-defined]
    assert changed(before, mysql_snapshot(admin_url, db, tmp_path)) == []


@pytest.mark.mysql
def test_mariadb_grant_mask_withholds_generated_columns_and_start_up_checks_them(
    maria_cust: tuple[str, str, str], tmp_path: Path
) -> None:
    admin_url, _, db = maria_cust
    role = f"{db}_g"
    admin = mysql_admin(admin_url)
    with admin.cursor() as c:
        c.execute(f"ALTER TABLE {db}.customers ADD email_lower VARCHAR(50) AS (LOWER(email)) VIRTUAL")
        c.execute(
            f"ALTER TABLE {db}.customers ADD domain VARCHAR(50) AS (SUBSTRING_INDEX(email_lower, '@', -1))"
        )
        c.execute(f"ALTER TABLE {db}.customers ADD name_len INT AS (LENGTH(name)) PERSISTENT")
        # red team mask17 F4: a DEFAULT that reads the row stores a copy as a generated column does
        c.execute(f"ALTER TABLE {db}.customers ADD login VARCHAR(50) DEFAULT (LOWER(email))")
        c.execute(f"ALTER TABLE {db}.customers ADD tier VARCHAR(10) DEFAULT 'a`email`'")  # a literal
    masks = tmp_path / "masks.yaml"
    masks.write_text("masks:\n  - customers.email\n")
    done = run_mcpkit(
        "sql", "grant", "--dsn", admin_url, "--role", role, "--tables", "customers", "--mask", str(masks)
    )
    assert done.returncode == 0, done.stderr
    assert f"GRANT SELECT (`id`, `name`, `name_len`, `tier`) ON `{db}`.`customers`" in done.stdout, (
        done.stdout
    )
    try:
        with admin.cursor() as c:
            for statement in _statements(done.stdout):
                c.execute(statement)
        password = done.stdout.split("IDENTIFIED BY '")[1].split("'")[0]
        url = make_url(admin_url).set(username=role, password=password).render_as_string(False)
        before = mysql_snapshot(admin_url, db, tmp_path)
        served = _served(url, ["customers.email"])
        assert _answer(served, "SELECT id, name_len FROM customers WHERE id = 1") == "[[1, 2]]"
        for sql in (
            "SELECT id, email_lower FROM customers",
            "SELECT id, domain FROM customers",
            "SELECT id, login FROM customers",
        ):
            answer = _answer(served, sql)
            assert "x.example" not in answer and (answer == "refused" or MASKED in answer), (sql, answer)
        served.engine.close()  # type: ignore[attr-defined]
        alone = _alone(url, ["customers.email"])
        assert _answer(alone, "SELECT id, email_lower FROM customers") == "failed permission"
        alone.engine.close()  # type: ignore[attr-defined]
        # A grant made by hand that includes a generated column is refused at start-up, also
        # one computed from another generated column the account cannot see.
        with admin.cursor() as c:
            c.execute(f"GRANT SELECT (domain) ON {db}.customers TO '{role}'@'%'")
        with pytest.raises(SqlConfigError, match="domain"):
            _served(url, ["customers.email"])
        assert changed(before, mysql_snapshot(admin_url, db, tmp_path)) == []
    finally:
        with admin.cursor() as c:
            c.execute(f"DROP USER IF EXISTS '{role}'@'%'")
        admin.close()


# --- PostgreSQL: generated columns and partitions ------------------------------------------------


@pytest.fixture
def pg_masked(pg_url: str) -> Iterator[tuple[str, str, str]]:
    tag = tokens.token_hex(4)
    schema = f"mk_dm_{tag}"
    admin = pg_admin(pg_url)
    for sql in (
        f"CREATE SCHEMA {schema}",
        f"CREATE SEQUENCE {schema}.canary_seq",
        f"CREATE TABLE {schema}.cust (id int, name text, email text,"
        " email_lower text GENERATED ALWAYS AS (lower(email)) STORED)",
        f"INSERT INTO {schema}.cust (id, name, email) VALUES (1, 'Alice', 'Alice@{SECRET}.example')",
        f"CREATE TABLE {schema}.customers (id int, region text, email text) PARTITION BY LIST (region)",
        f"CREATE TABLE {schema}.customers_eu PARTITION OF {schema}.customers FOR VALUES IN ('eu')",
        f"INSERT INTO {schema}.customers VALUES (1, 'eu', 'alice@{SECRET}.example')",
    ):
        admin.execute(sql)
    try:
        yield pg_url, schema, tag
    finally:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")
        admin.close()


def _statements(text: str) -> list[str]:
    return [
        line.strip().rstrip(";") for line in text.splitlines() if line.strip() and not line.startswith("--")
    ]


@pytest.mark.postgres
def test_pg_grant_mask_withholds_generated_columns_and_start_up_checks_them(
    pg_masked: tuple[str, str, str], tmp_path: Path
) -> None:
    admin_url, schema, tag = pg_masked
    role = f"mk_dm_{tag}_g"
    masks = tmp_path / "masks.yaml"
    masks.write_text("masks:\n  - cust.email\n")
    done = run_mcpkit(
        "sql", "grant", "--dsn", admin_url, "--role", role, "--tables", f"{schema}.cust", "--mask", str(masks)
    )
    assert done.returncode == 0, done.stderr
    assert f'GRANT SELECT ("id", "name") ON {schema}.cust TO "{role}"' in done.stdout, done.stdout
    admin = pg_admin(admin_url)
    try:
        for statement in _statements(done.stdout):
            admin.execute(statement)
        password = done.stdout.split("PASSWORD '")[1].split("'")[0]
        url = make_url(admin_url).set(username=role, password=password).render_as_string(False)
        before = pg_snapshot(admin_url, schema, tmp_path)
        served = _served(url, ["cust.email"])
        answer = _answer(served, "SELECT id, email_lower FROM cust")
        assert SECRET not in answer and (answer == "refused" or MASKED in answer), answer
        served.engine.close()  # type: ignore[attr-defined]
        alone = _alone(url, ["cust.email"])
        assert _answer(alone, "SELECT id, email_lower FROM cust") == "failed permission"
        alone.engine.close()  # type: ignore[attr-defined]
        # A grant made by hand that includes the generated column is refused at start-up.
        admin.execute(f'GRANT SELECT (email_lower) ON {schema}.cust TO "{role}"')
        with pytest.raises(SqlConfigError, match="email_lower"):
            _served(url, ["cust.email"])
        assert changed(before, pg_snapshot(admin_url, schema, tmp_path)) == []
    finally:
        admin.execute(f'DROP OWNED BY "{role}"')
        admin.execute(f'DROP ROLE "{role}"')
        admin.close()


@pytest.mark.postgres
def test_pg_partitions_of_a_masked_table_are_checked_and_masked(
    pg_masked: tuple[str, str, str], tmp_path: Path
) -> None:
    admin_url, schema, tag = pg_masked
    role = f"mk_dm_{tag}_p"
    admin = pg_admin(admin_url)
    admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw'")
    try:
        admin.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        admin.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}")  # the careless way
        admin.execute(f"ALTER ROLE {role} SET search_path = {schema}")
        url = make_url(admin_url).set(username=role, password="pw").render_as_string(False)
        with pytest.raises(SqlConfigError) as refused:
            _served(url, ["customers.email"])
        text = str(refused.value)
        assert f"{schema}.customers_eu" in text and f"{schema}.customers:" in text, text
        for line in text.splitlines()[1:]:  # the printed fixes
            fix = line.split(": ", 1)[1].split(" (also from")[0]
            for statement in fix.split("; "):
                admin.execute(statement)
        before = pg_snapshot(admin_url, schema, tmp_path)
        served = _served(url, ["customers.email"])  # clean now
        for sql in ("SELECT id, email FROM customers_eu", "SELECT id, email FROM customers"):
            answer = _answer(served, sql)
            assert SECRET not in answer and (answer == "refused" or MASKED in answer), (sql, answer)
        served.engine.close()  # type: ignore[attr-defined]
        alone = _alone(url, ["customers.email"])
        assert _answer(alone, "SELECT id, email FROM customers_eu") == "failed permission"
        assert _answer(alone, "SELECT id FROM customers_eu") == "[[1]]"
        alone.engine.close()  # type: ignore[attr-defined]
        assert changed(before, pg_snapshot(admin_url, schema, tmp_path)) == []
    finally:
        admin.execute(f"DROP OWNED BY {role}")
        admin.execute(f"DROP ROLE {role}")
        admin.close()


@pytest.mark.postgres
def test_pg_a_mask_on_a_partition_or_child_masks_its_parents(
    pg_masked: tuple[str, str, str], tmp_path: Path
) -> None:
    admin_url, schema, tag = pg_masked
    role = f"mk_dm_{tag}_u"
    admin = pg_admin(admin_url)
    admin.execute(f"CREATE TABLE {schema}.people (id int, email text)")  # an inheritance parent
    admin.execute(f"CREATE TABLE {schema}.people_eu () INHERITS ({schema}.people)")
    admin.execute(f"INSERT INTO {schema}.people_eu VALUES (1, 'bo@{SECRET}.example')")
    masks = tmp_path / "masks.yaml"
    masks.write_text("masks:\n  - customers_eu.email\n  - people_eu.email\n")
    tables = ",".join(f"{schema}.{t}" for t in ("customers", "customers_eu", "people", "people_eu"))
    done = run_mcpkit(
        "sql", "grant", "--dsn", admin_url, "--role", role, "--tables", tables, "--mask", str(masks)
    )
    assert done.returncode == 0, done.stderr
    for parent in ("customers", "people"):  # the parents' e-mail is not granted either
        assert f'ON {schema}.{parent} TO "{role}"' in done.stdout, done.stdout
        assert f'GRANT SELECT ON {schema}.{parent} TO "{role}"' not in done.stdout, done.stdout
    try:
        for statement in _statements(done.stdout):
            admin.execute(statement)
        admin.execute(f"ALTER ROLE {role} SET search_path = {schema}")
        password = done.stdout.split("PASSWORD '")[1].split("'")[0]
        url = make_url(admin_url).set(username=role, password=password).render_as_string(False)
        before = pg_snapshot(admin_url, schema, tmp_path)
        served = _served(url, ["customers_eu.email", "people_eu.email"])
        for sql in (
            "SELECT id, email FROM customers",
            "SELECT id, email FROM people",
            "SELECT * FROM people",
        ):
            answer = _answer(served, sql)
            assert SECRET not in answer and (answer == "refused" or MASKED in answer), (sql, answer)
        served.engine.close()  # type: ignore[attr-defined]
        alone = _alone(url, ["customers_eu.email", "people_eu.email"])
        assert _answer(alone, "SELECT id, email FROM customers") == "failed permission"
        assert _answer(alone, "SELECT id FROM people") == "[[1]]"
        alone.engine.close()  # type: ignore[attr-defined]
        assert changed(before, pg_snapshot(admin_url, schema, tmp_path)) == []
        # A parent granted whole by hand is refused at start-up, with the fix.
        admin.execute(f'GRANT SELECT ON {schema}.customers TO "{role}"')
        with pytest.raises(SqlConfigError, match=rf"{schema}\.customers:"):
            _served(url, ["customers_eu.email"])
    finally:
        admin.execute(f'DROP OWNED BY "{role}"')
        admin.execute(f'DROP ROLE "{role}"')
        admin.close()


@pytest.mark.parametrize(
    ("dialect", "sql", "sent"),
    [
        # then every visible column not shown, in its exact form (rt20mask F1: where a LIMIT stops)
        (
            "sqlite",
            "SELECT id FROM customers",
            'SELECT id FROM customers ORDER BY 1, "customers"."name" COLLATE BINARY,'
            ' typeof("customers"."name"), atan2("customers"."name", -1)',
        ),
        (
            "sqlite",
            "SELECT id, name FROM customers LIMIT 3",
            "SELECT id, name FROM customers ORDER BY 1, 2,"
            " name COLLATE BINARY, typeof(name), atan2(name, -1) LIMIT 3",
        ),
        # ordered by the query: ties broken by every output
        (
            "sqlite",
            "SELECT id FROM customers ORDER BY name",
            'SELECT id FROM customers ORDER BY name, 1, "customers"."name" COLLATE BINARY,'
            ' typeof("customers"."name"), atan2("customers"."name", -1)',
        ),
        (
            "postgres",
            "SELECT id FROM customers UNION SELECT 1",
            "SELECT id FROM customers UNION SELECT 1 ORDER BY 1",
        ),
        (
            "postgres",
            "SELECT array_agg(id) AS a FROM customers",
            "SELECT ARRAY_AGG(id ORDER BY id) AS a FROM customers ORDER BY 1",
        ),
        (
            "mysql",
            "SELECT GROUP_CONCAT(name) AS g FROM customers",
            "SELECT GROUP_CONCAT(name ORDER BY name, CAST(name AS BINARY) SEPARATOR ',') AS g"
            " FROM customers ORDER BY 1",
        ),
        (
            "postgres",
            "SELECT row_number() OVER () AS r FROM customers",
            'SELECT ROW_NUMBER() OVER (ORDER BY "customers"."id", "customers"."name",'
            ' pg_catalog.format(\'%L\', "customers"."name") COLLATE pg_catalog."C") AS r'
            ' FROM customers ORDER BY 1, "customers"."id",'
            ' pg_catalog.format(\'%L\', "customers"."name") COLLATE pg_catalog."C"',
        ),
        (
            "mysql",
            "SELECT lag(id) OVER () AS l FROM customers",
            "SELECT LAG(id) OVER (ORDER BY `customers`.`id`, `customers`.`name`,"
            " CAST(`customers`.`name` AS BINARY)) AS l"
            " FROM customers ORDER BY 1, `customers`.`id`, CAST(`customers`.`name` AS BINARY)",
        ),
        ("mysql", "SELECT JSON_OBJECTAGG(name, id) AS j FROM customers", "refused"),
        (
            "postgres",
            "SELECT jsonb_agg_strict(id) AS j FROM customers",
            "SELECT jsonb_agg_strict(id ORDER BY id) AS j FROM customers ORDER BY 1",
        ),
        (
            "postgres",
            "SELECT json_agg_strict(id) AS j FROM customers",
            "SELECT json_agg_strict(id ORDER BY id) AS j FROM customers ORDER BY 1",
        ),
        ("sqlite", "SELECT n FROM (SELECT * FROM customers LIMIT 2) AS s", "refused"),
    ],
)
def test_plans_over_masked_tables_order_by_what_is_visible(dialect: str, sql: str, sent: str | None) -> None:
    from mcpkit.sql.masking.plan import plan_masking

    schema = {"customers": {"id": "INT", "name": "TEXT", "email": "TEXT"}}
    try:
        got = plan_masking(sql, dialect, schema, MaskPolicy.of(["customers.email"])).sql
    except Refused:
        got = "refused"
    assert got == sent


@pytest.mark.postgres
def test_pg_full_text_trigger_copy_of_a_masked_column_is_masked_and_other_triggers_warned(
    pg_url: str, tmp_path: Path
) -> None:
    # Red team pg11 F6: tsvector_update_trigger(search, cfg, name, email) copies the masked email
    # into `search`, which grant --mask granted and the server served in clear.
    tag = tokens.token_hex(4)
    schema, role = f"mk_ft_{tag}", f"mk_ft_{tag}_r"
    admin = pg_admin(pg_url)
    try:
        for sql in (
            f"CREATE SCHEMA {schema}",
            f"CREATE TABLE {schema}.customers (id int, name text, email text, search tsvector)",
            f"CREATE TRIGGER customers_search BEFORE INSERT OR UPDATE ON {schema}.customers FOR EACH ROW"
            " EXECUTE FUNCTION tsvector_update_trigger(search, 'pg_catalog.simple', name, email)",
            f"INSERT INTO {schema}.customers (id, name, email) VALUES (1, 'Ann Lee', 'ann@{SECRET}.example')",
            f"CREATE TABLE {schema}.notes (id int, email text, copy text)",
            f"CREATE FUNCTION {schema}.keep() RETURNS trigger LANGUAGE plpgsql"
            " AS $$BEGIN NEW.copy := NEW.email; RETURN NEW; END$$",
            f"CREATE TRIGGER notes_keep BEFORE INSERT ON {schema}.notes FOR EACH ROW"
            f" EXECUTE FUNCTION {schema}.keep()",
        ):
            admin.execute(sql)
        masks = tmp_path / "masks.yaml"
        masks.write_text("masks:\n  - customers.email\n  - notes.email\n")
        tables = f"{schema}.customers,{schema}.notes"
        done = run_mcpkit(
            "sql", "grant", "--dsn", pg_url, "--role", role, "--tables", tables, "--mask", str(masks)
        )
        assert done.returncode == 0, done.stderr
        assert f'GRANT SELECT ("id", "name") ON {schema}.customers TO "{role}"' in done.stdout, done.stdout
        for statement in _statements(done.stdout):
            admin.execute(statement)
        password = done.stdout.split("PASSWORD '")[1].split("'")[0]
        url = make_url(pg_url).set(username=role, password=password).render_as_string(False)
        served = _served(url, ["customers.email", "notes.email"])
        for sql in ("SELECT id, search FROM customers", "SELECT search::text FROM customers"):
            answer = _answer(served, sql)
            assert SECRET not in answer and (answer == "refused" or MASKED in answer), (sql, answer)
        engine = served.engine  # type: ignore[attr-defined]
        masked = {"customers": frozenset({"email"}), "notes": frozenset({"email"})}
        with engine.session(30.0, "t") as (conn, _):
            hints = engine.profile.trigger_hints(conn, masked)  # mask17 F2: its own warning now
        engine.close()
        assert any("notes_keep" in h for h in hints) and not any("customers_search" in h for h in hints), (
            hints
        )
        # A grant made by hand that includes the trigger's column is refused at start-up.
        admin.execute(f'GRANT SELECT (search) ON {schema}.customers TO "{role}"')
        with pytest.raises(SqlConfigError, match="search"):
            _served(url, ["customers.email", "notes.email"])
    finally:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")
        if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
            admin.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')
        admin.close()
