"""Stored bodies that follow a masked scan order the order check missed (red team rt27 F2-F5).

- F2: a SQL function's own `SET search_path` made `customers` in its string body an invoker view
  whose `id` is a constant, while the check resolved the name with the session's path (the table,
  primary key `id`): `ORDER BY id` with the implicit `LIMIT 1` looked total. Each name of such a
  body is now resolved under both paths; one that resolves elsewhere makes the function refused.
- F3: order keys were compared case-folded: PostgreSQL's primary key `"ID"` counted as a plain,
  non-unique `id`. PostgreSQL names are now compared as it folds them.
- F4/F5: a value that changes from row to row in evaluation order (`clock_timestamp()`, `random()`,
  a VOLATILE function; MariaDB's `RAND(1)`, `SYSDATE(6)`) numbered the rows in scan order in a view.
  The per-call analysis's own test (`masking.shapes.row_order_call`) now runs on stored bodies too.
Each refuses start-up with its `--allow view-order:` / `function-order:` opt-in; a control passes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.masking import KnownSchema, MaskPolicy
from mcpkit.sql.masking.view_order import order_reason
from tests.sql.sql_support import MysqlScratch, PgScratch, masks_file, mysql_scratch, pg_scratch
from tests.sql.sql_support import run_cli as _run

SECRET = "@secret.example"
# Ids out of e-mail order: the e-mail ranking lists the ids 4, 1, 5, 2, 3.
ROWS = [(1, "Ann", "b"), (2, "Bob", "d"), (3, "Cy", "e"), (4, "Dan", "a"), (5, "Eve", "c")]
REFUSED = "may answer in the scan order of a masked table"


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt27b") as db:
        rows = ", ".join(f"({i}, '{n}', '{e}{SECRET}')" for i, n, e in ROWS)
        accounts = ", ".join(f"({i}, 1, '{e}{SECRET}')" for i, _, e in ROWS)
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text NOT NULL);
            INSERT INTO customers VALUES {rows};
            CREATE INDEX customers_email ON customers (email);
            CLUSTER customers USING customers_email;
            CREATE TABLE accounts ("ID" int PRIMARY KEY, id int NOT NULL, email text NOT NULL);
            INSERT INTO accounts VALUES {accounts};
            CREATE INDEX accounts_email ON accounts (email);
            CLUSTER accounts USING accounts_email;
            ANALYZE customers; ANALYZE accounts;
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT (id, name) ON customers TO {db.reader};
            GRANT SELECT ("ID", id) ON accounts TO {db.reader};
            """
        )
        yield db


def _query(pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    masks = masks_file(tmp_path, "customers.email", "accounts.email")
    clustered = [a for t in ("customers", "accounts") for a in ("--allow", f"clustered-order:{t}")]
    return _run(capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, *clustered, *args)


@pytest.mark.postgres
def test_postgres_a_function_whose_own_search_path_moves_a_name_refuses_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(
        f"""
        CREATE SCHEMA rt27b_x; GRANT USAGE ON SCHEMA rt27b_x TO {pg.reader};
        CREATE VIEW rt27b_x.customers WITH (security_invoker = true) AS
            SELECT id AS real, 1 AS id FROM public.customers;
        GRANT SELECT ON rt27b_x.customers TO {pg.reader};
        CREATE FUNCTION f_path() RETURNS int LANGUAGE sql STABLE SET search_path = rt27b_x, public
            AS 'SELECT real FROM customers ORDER BY id';
        CREATE FUNCTION f_same(k int) RETURNS text LANGUAGE sql STABLE SET search_path = public
            AS 'SELECT name FROM customers WHERE id = k';
        SET search_path = rt27b_x, public;
        CREATE FUNCTION public.f_atomic() RETURNS int LANGUAGE sql STABLE SET search_path = rt27b_x, public
            BEGIN ATOMIC SELECT real FROM customers ORDER BY id; END;
        CREATE VIEW public.v_path WITH (security_invoker = true) AS
            SELECT real FROM customers ORDER BY id LIMIT 1;
        RESET search_path;
        GRANT SELECT ON public.v_path TO {pg.reader};
        """
    )
    # what the red team read: the first row in scan order, the id of the smallest e-mail
    assert pg.admin.execute("SELECT f_path()").fetchone()[0] == 4
    allow = [a for f in ("f_path", "f_same", "f_atomic") for a in ("--allow", f"function:public.{f}")]
    code, out = _query(pg, tmp_path, capsys, *allow, "SELECT public.f_path() AS a")
    assert code == 2, out  # before: | 4 |
    assert f"function public.f_path {REFUSED}: its own search_path makes a name" in out, out
    assert "--allow function-order:public.f_path" in out
    assert "public.f_same " not in out, out  # its path resolves every name alike: no finding
    # stored resolved: PostgreSQL prints the names qualified where the session's path differs
    assert f"function public.f_atomic {REFUSED}: LIMIT" in out, out
    assert f"view public.v_path {REFUSED}: LIMIT" in out, out
    code, out = _query(
        pg,
        tmp_path,
        capsys,
        *allow,
        *[
            a
            # f_same: a user function called over a masked read counts as per-row, whatever its body
            for o in (
                "function-order:public.f_path",
                "function-order:public.f_atomic",
                "function-order:public.f_same",
            )
            for a in ("--allow", o)
        ],
        "--allow",
        "view-order:public.v_path",
        "SELECT public.f_same(2) AS b",
    )
    assert code == 0, out
    assert "| Bob |" in out


@pytest.mark.postgres
def test_postgres_a_quoted_key_is_not_a_plain_column_of_another_case(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    views = {
        "v_acc": 'SELECT "ID" FROM accounts ORDER BY id LIMIT 1',
        "v_acc_agg": "SELECT string_agg(\"ID\"::text, ',' ORDER BY id) AS ids FROM accounts",
        "v_acc_ok": 'SELECT string_agg("ID"::text, \',\' ORDER BY "ID") AS ids FROM accounts',
    }
    for name, sql in views.items():
        pg.admin.execute(f"CREATE VIEW {name} WITH (security_invoker = true) AS {sql}")
        pg.admin.execute(f"GRANT SELECT ON {name} TO {pg.reader}")
    assert pg.admin.execute("SELECT ids FROM v_acc_agg").fetchone()[0] == "4,1,5,2,3"  # the ranking
    code, out = _query(pg, tmp_path, capsys, "SELECT ids FROM v_acc_agg")
    assert code == 2, out  # before: | 4,1,5,2,3 |
    assert "4,1,5,2,3" not in out
    assert f"view public.v_acc {REFUSED}: LIMIT" in out, out
    assert f"view public.v_acc_agg {REFUSED}: aggregate" in out, out
    assert "public.v_acc_ok " not in out, out
    allow = [a for v in ("v_acc", "v_acc_agg") for a in ("--allow", f"view-order:public.{v}")]
    code, out = _query(pg, tmp_path, capsys, *allow, "SELECT ids FROM v_acc_ok")
    assert code == 0, out
    assert "1,2,3,4,5" in out


@pytest.mark.postgres
def test_postgres_a_per_row_clock_or_volatile_call_in_a_view_refuses_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute("CREATE FUNCTION tick() RETURNS float8 LANGUAGE sql VOLATILE AS 'SELECT random()'")
    # declared STABLE, still a per-row clock: a declaration is only a claim
    pg.admin.execute("CREATE FUNCTION stamp(x int) RETURNS text LANGUAGE sql STABLE AS 'SELECT timeofday()'")
    views = {
        "v_clock": "SELECT id, clock_timestamp() AS t FROM customers",
        "v_random": "SELECT id, random() AS r FROM customers",
        "v_tick": "SELECT id, tick() AS r FROM customers",
        "v_stamp": "SELECT id, stamp(id) AS r FROM customers",
        "v_now": "SELECT id, now() AS t FROM customers",  # one value per statement: passes
    }
    for name, sql in views.items():
        pg.admin.execute(f"CREATE VIEW {name} WITH (security_invoker = true) AS {sql}")
        pg.admin.execute(f"GRANT SELECT ON {name} TO {pg.reader}")
    pg.admin.execute(f"GRANT EXECUTE ON FUNCTION tick() TO {pg.reader}")
    # the clock numbers the rows in scan order, the e-mail ranking
    slow = "SELECT id FROM v_clock WHERE length(repeat(id::text, 300000)) > 0 ORDER BY t"
    assert [r[0] for r in pg.admin.execute(slow)] == [4, 1, 5, 2, 3]
    # each needs its own opt-in anyway (VOLATILE; a SQL function's STABLE label is not verified)
    tick = ["--allow", "function:public.tick", "--allow", "function:public.stamp"]
    code, out = _query(pg, tmp_path, capsys, *tick, "SELECT id, t FROM v_clock")
    assert code == 2, out  # before: answered, t in e-mail order
    assert f"view public.v_clock {REFUSED}: it calls clock_timestamp" in out, out
    assert f"view public.v_random {REFUSED}: it calls rand" in out, out
    assert f"view public.v_tick {REFUSED}: it calls tick" in out, out
    assert f"view public.v_stamp {REFUSED}: it calls stamp" in out, out
    assert "--allow view-order:public.v_clock" in out
    assert "public.v_now " not in out, out
    allow = [
        a for v in ("v_clock", "v_random", "v_tick", "v_stamp") for a in ("--allow", f"view-order:public.{v}")
    ]
    code, out = _query(pg, tmp_path, capsys, *tick, *allow, "SELECT count(*) AS n FROM v_now")
    assert code == 0, out
    assert "| 5 |" in out


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "rt27b") as db, db.admin.cursor() as c:
        rows = ", ".join(f"({i}, '{n}', '{e}{SECRET}')" for i, n, e in ROWS)
        c.execute(
            f"CREATE TABLE {db.db}.customers (id int PRIMARY KEY, name varchar(20) NOT NULL,"
            " email varchar(80) NOT NULL, KEY email_idx (email, id))"
        )
        c.execute(f"INSERT INTO {db.db}.customers VALUES {rows}")
        c.execute(f"GRANT SELECT (id, name) ON {db.db}.customers TO '{db.reader}'@'%'")
        yield db


@pytest.mark.mysql
def test_mariadb_a_seeded_rand_or_sysdate_in_a_view_refuses_start_up(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    views = {
        "v_rand": "SELECT id, RAND(1) AS r FROM customers",
        "v_sysdate": "SELECT id, SYSDATE(6) AS t FROM customers",
        "v_now": "SELECT id, NOW() AS t FROM customers",
    }
    with my.admin.cursor() as c:
        for name, sql in views.items():
            c.execute(
                f"CREATE SQL SECURITY INVOKER VIEW {my.db}.{name} AS {sql.replace('FROM ', f'FROM {my.db}.')}"
            )
            c.execute(f"GRANT SELECT, SHOW VIEW ON {my.db}.{name} TO '{my.reader}'@'%'")
    masks = masks_file(tmp_path, "customers.email", "accounts.email")
    code, out = _run(capsys, "sql", "query", "--dsn", my.reader_url, "--mask", masks, "SELECT * FROM v_rand")
    assert code == 2, out  # before: RAND(1)'s sequence in scan order
    assert f"view {my.db}.v_rand {REFUSED}: it calls rand" in out, out
    assert f"view {my.db}.v_sysdate {REFUSED}: it calls sysdate" in out, out
    assert f"{my.db}.v_now " not in out, out
    allow = [a for v in ("v_rand", "v_sysdate") for a in ("--allow", f"view-order:{my.db}.{v}")]
    code, out = _run(
        capsys,
        "sql",
        "query",
        "--dsn",
        my.reader_url,
        "--mask",
        masks,
        *allow,
        "SELECT count(*) AS n FROM v_now",
    )
    assert code == 0, out
    assert "| 5 |" in out


# --- parse level ------------------------------------------------------------------------------

KNOWN = KnownSchema(
    {"customers": {"id": "INT", "email": "TEXT"}, "accounts": {"ID": "INT", "id": "INT", "email": "TEXT"}},
    "postgres",
)
POLICY = MaskPolicy.of(["customers.email", "accounts.email"])


def _pk(schema: str | None, table: str) -> list[frozenset[str]]:
    return [frozenset({"ID" if table == "accounts" else "id"})]


@pytest.mark.parametrize(
    ("sql", "one_row", "total"),
    [
        ('SELECT "ID" FROM accounts ORDER BY id LIMIT 1', False, False),
        ('SELECT "ID" FROM accounts ORDER BY "ID" LIMIT 1', False, True),
        ('SELECT "ID", row_number() OVER (ORDER BY id) FROM accounts', False, False),
        ('SELECT "ID", row_number() OVER (ORDER BY "ID") FROM accounts', False, True),
        ('SELECT DISTINCT ON (id) "ID" FROM accounts ORDER BY id', False, False),
        ('SELECT "ID" FROM accounts WHERE id = 1', True, False),  # pins the plain column, not the key
        ('SELECT "ID" FROM accounts WHERE "ID" = 1', True, True),
        ("SELECT id FROM customers ORDER BY ID LIMIT 1", False, True),  # unquoted: folded to id
        ('SELECT id FROM customers ORDER BY "ID" LIMIT 1', False, False),
        ('SELECT id FROM customers c ORDER BY "C".id LIMIT 1', False, False),  # another qualifier
    ],
)
def test_postgres_order_keys_compare_as_postgresql_folds_them(sql: str, one_row: bool, total: bool) -> None:
    found = order_reason(sql, "postgres", KNOWN, POLICY, _pk, one_row=one_row)
    assert (found is None) is total, found


@pytest.mark.parametrize(
    ("sql", "dialect", "volatile"),
    [
        ("SELECT id, clock_timestamp() FROM customers", "postgres", ""),
        ("SELECT id, timeofday() FROM customers", "postgres", ""),
        ("SELECT id, nextval('s') FROM customers", "postgres", ""),
        ("SELECT id, random() FROM customers", "postgres", ""),
        ("SELECT id, gen_random_uuid() FROM customers", "postgres", "gen_random_uuid"),
        ("SELECT id, my_counter() FROM customers", "postgres", "my_counter"),
        ("SELECT id, (SELECT max(x) FROM t WHERE x < setseed(0.5)) FROM customers", "postgres", "setseed"),
        ("SELECT id, RAND(1) FROM customers", "mysql", ""),
        ("SELECT id, RAND() FROM customers", "mysql", ""),
        ("SELECT id, SYSDATE(6) FROM customers", "mysql", ""),
        ("SELECT id, UUID() FROM customers", "mysql", ""),
        ("SELECT id, f_nd(id) FROM customers", "mysql", "f_nd"),
    ],
)
def test_a_row_order_call_in_a_stored_body_counts(sql: str, dialect: str, volatile: str) -> None:
    names = frozenset({volatile} - {""})
    found = order_reason(sql, dialect, KNOWN, POLICY, _pk, volatile=names)
    assert found is not None and "whose value changes from row to row" in found, found


def test_a_stable_call_passes() -> None:
    for sql in ("SELECT id, now() FROM customers", "SELECT id, upper(name) FROM customers"):
        assert order_reason(sql, "postgres", KNOWN, POLICY, _pk, volatile=frozenset({"random"})) is None
