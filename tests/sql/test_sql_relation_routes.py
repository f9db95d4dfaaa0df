"""What a readable relation makes PostgreSQL run beyond its own rows (red team pg11, F3 and F4).

A partition or inheritance child is scanned through its parent with no privilege of its own, so a
foreign table attached there leaves the database on every read of the parent (F3). The planner
folds a readable table's index expressions and predicates, its (and its children's) CHECK
constraints and partition key, and evaluates its extended statistics' expressions, as the
reader: a plpgsql function there runs for a plain `SELECT count(*)` (F4).

Each test builds the careless set-up, shows the route is real (the reader's own query runs the
hidden code: a file written, a notification sent), then asserts the start-up check refuses with
the finding while nothing ran, and that after the printed fix the check is clean.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from mcpkit.sql.checks import ensure_safe_account, inspect_account
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.profiles import AccountReport
from tests.sql.sql_support import pg_admin, pg_need_extensions, pg_scratch

ROUTE_CODES = ("route", "function", "foreign-table")


@dataclass
class Db:
    admin: str
    reader: str
    owner: str
    tag: str
    heard: list[str] = field(default_factory=list)
    listener: psycopg.Connection[Any] | None = None

    def as_owner(self, sql: str) -> None:
        with pg_admin(self.admin) as c:
            c.execute(f"SET ROLE {self.owner}")
            c.execute(sql)

    def listen(self) -> None:
        """Notifications on `mk_ran_<tag>`: every hidden function here sends one when it runs."""
        self.listener = pg_admin(self.admin)
        self.listener.add_notify_handler(lambda n: self.heard.append(n.payload))
        self.listener.execute(f"LISTEN mk_ran_{self.tag}")

    def drain(self) -> list[str]:
        assert self.listener is not None
        time.sleep(0.2)
        self.listener.execute("SELECT 1")
        heard, self.heard[:] = list(self.heard), []
        return heard

    def as_reader(self, sql: str) -> None:
        url = make_url(self.reader).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("BEGIN READ ONLY")
            c.execute(sql)
            c.execute("COMMIT")

    def report(self) -> AccountReport:
        engine = SqlEngine(self.reader)
        try:
            return inspect_account(engine)
        finally:
            engine.close()


@pytest.fixture
def db(pg_url: str) -> Iterator[Db]:
    """A database owned by a non-superuser, a reader, and a schema the reader cannot use."""
    tag = secrets.token_hex(4)
    owner = f"mk_rel_own_{tag}"
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE ROLE {owner} NOLOGIN")
    try:
        with pg_scratch(pg_url, "rel") as scratch:  # dropped first, with everything the owner made in it
            scratch.admin.execute(f"ALTER DATABASE {scratch.db} OWNER TO {owner}")
            scratch.admin.execute(f"ALTER SCHEMA public OWNER TO {owner}")
            scratch.admin.execute(f"CREATE SCHEMA priv AUTHORIZATION {owner}")
            env = Db(scratch.admin_url, scratch.reader_url, owner, tag)
            env.listen()
            yield env
            if env.listener is not None:
                env.listener.close()
    finally:
        with pg_admin(pg_url) as c:
            c.execute(f"DROP ROLE {owner}")


def _routes(report: AccountReport) -> list[str]:
    return [f.line() for f in report.findings if f.code in ROUTE_CODES]


def _hidden(name: str, tag: str, returns: str = "int", value: str = "0") -> str:
    return (
        f"CREATE FUNCTION priv.{name}() RETURNS {returns} LANGUAGE plpgsql IMMUTABLE AS $$"
        f" BEGIN PERFORM pg_notify('mk_ran_{tag}', '{name}'); RETURN {value}; END $$;"
    )


@pytest.mark.postgres
def test_f3_a_foreign_partition_or_child_of_a_readable_table_is_refused(db: Db, tmp_path: Path) -> None:
    mark = Path(f"/tmp/mk_rel_fdw_{db.tag}")
    program = f"echo ran >> {mark}; echo 1500,archived"
    with pg_admin(db.admin) as c:  # the operator's "archive partition as a foreign table" set-up
        pg_need_extensions(c, "file_fdw")
        c.execute("CREATE EXTENSION file_fdw SCHEMA priv; CREATE SERVER files FOREIGN DATA WRAPPER file_fdw")
        c.execute("CREATE TABLE public.metrics (id int, v text) PARTITION BY RANGE (id)")
        c.execute("CREATE TABLE public.metrics_live PARTITION OF public.metrics FOR VALUES FROM (0) TO (9)")
        c.execute(
            "CREATE FOREIGN TABLE priv.metrics_arch PARTITION OF public.metrics FOR VALUES FROM (1000) TO"
            f" (2000) SERVER files OPTIONS (program '{program}', format 'csv')"
        )
        c.execute("CREATE TABLE public.hist (id int, v text)")
        c.execute(
            "CREATE FOREIGN TABLE priv.hist_old () INHERITS (public.hist) SERVER files"
            f" OPTIONS (program '{program}', format 'csv')"
        )
        c.execute("CREATE VIEW public.hist_v AS SELECT id FROM public.hist")
    reader = make_url(db.reader).username
    with pg_admin(db.admin) as c:
        c.execute(f"GRANT SELECT ON public.metrics, public.hist, public.hist_v TO {reader}")
    try:
        db.as_reader("SELECT count(*) FROM public.metrics")  # as found, the route is real
        assert mark.read_text().count("ran") == 1
        mark.unlink()
        report = db.report()
        assert not mark.exists()  # the check itself ran nothing
        found = {f.message.split(" reads ")[0]: f for f in report.findings if f.code == "foreign-table"}
        assert set(found) == {"relation public.metrics", "relation public.hist", "relation public.hist_v"}
        assert "table priv.metrics_arch (server files, file_fdw)" in found["relation public.metrics"].message
        assert found["relation public.metrics"].fix == (
            "ALTER TABLE public.metrics DETACH PARTITION priv.metrics_arch"
        )
        assert found["relation public.hist"].fix == "ALTER TABLE priv.hist_old NO INHERIT public.hist"
        assert found["relation public.metrics"].opt_in == "foreign-table:priv.metrics_arch"
        with pytest.raises(SqlConfigError, match=r"foreign table priv\.metrics_arch"):
            ensure_safe_account(report)
        assert not mark.exists()
        with pg_admin(db.admin) as c:
            for fix in {found["relation public.metrics"].fix, found["relation public.hist"].fix}:
                c.execute(fix)
        assert _routes(db.report()) == []
        db.as_reader("SELECT count(*) FROM public.metrics UNION ALL SELECT count(*) FROM public.hist_v")
        assert not mark.exists()  # after the fix, reading the parents leaves the database no more
    finally:
        mark.unlink(missing_ok=True)


F4_OBJECTS = """
CREATE TABLE public.events (id int);
CREATE INDEX events_partial ON public.events (id) WHERE id > priv.floor_fn();
CREATE TABLE public.items (id int, name text);
CREATE INDEX items_expr ON public.items ((priv.norm_fn() || name));
CREATE TABLE public.hist (id int);
CREATE TABLE priv.hist_old (CHECK (id < priv.cap_fn())) INHERITS (public.hist);
CREATE TABLE public.accounts (id int, owner text);
CREATE STATISTICS priv.acc_st ON (id % priv.bucket_fn()), owner FROM public.accounts;
CREATE TABLE public.shards (id int) PARTITION BY LIST ((id % priv.shard_fn()));
CREATE TABLE public.shards_0 PARTITION OF public.shards DEFAULT;
"""
F4_QUERIES = {
    "public.events": ("floor_fn", "SELECT count(*) FROM public.events"),
    "public.items": ("norm_fn", "SELECT count(*) FROM public.items"),
    "public.hist": ("cap_fn", "SELECT count(*) FROM public.hist WHERE id = 500"),
    "public.accounts": ("bucket_fn", "SELECT count(*) FROM public.accounts WHERE owner = 'a'"),
    "public.shards": ("shard_fn", "SELECT count(*) FROM public.shards"),
}


@pytest.mark.postgres
def test_f4_functions_the_planner_folds_for_a_readable_table_are_walked(db: Db) -> None:
    hidden = [_hidden(n, db.tag, "text" if n == "norm_fn" else "int", "'k'" if n == "norm_fn" else "7")
              for n, _ in F4_QUERIES.values()]  # fmt: skip
    db.as_owner("\n".join(hidden) + F4_OBJECTS)  # EXECUTE left to PUBLIC, schema priv not usable
    reader = make_url(db.reader).username
    db.as_owner(f"GRANT SELECT ON {', '.join(F4_QUERIES)} TO {reader}")
    for table, (fn, sql) in F4_QUERIES.items():  # as found, each plain query runs the hidden function
        db.as_reader(sql)
        assert fn in db.drain(), table
    report = db.report()
    assert db.drain() == []  # the check itself ran none of them
    lines = _routes(report)
    for table, (fn, _) in F4_QUERIES.items():
        assert any(f"relation {table} runs priv.{fn}, which is written in plpgsql" in ln for ln in lines), (
            table,
            lines,
        )
    with pytest.raises(SqlConfigError, match=r"runs priv\."):
        ensure_safe_account(report)
    assert db.drain() == []
    for f in report.findings:
        if f.code in ROUTE_CODES:
            db.as_owner(f.fix)
    assert _routes(db.report()) == []


@pytest.mark.postgres
def test_ordinary_partitions_expression_indexes_checks_and_statistics_start_clean(db: Db) -> None:
    db.as_owner(
        "CREATE TABLE public.m (id int, name text, x int CHECK (x > 0)) PARTITION BY RANGE (id);"
        "CREATE TABLE public.m_0 PARTITION OF public.m FOR VALUES FROM (0) TO (100);"
        "CREATE TABLE public.m_1 PARTITION OF public.m FOR VALUES FROM (100) TO (200);"
        "CREATE INDEX m_lower ON public.m (lower(name)) WHERE x > 1;"
        "CREATE TABLE public.t (a int, b int, c text CHECK (length(c) < 10));"
        "CREATE TABLE public.t_child () INHERITS (public.t);"
        "CREATE STATISTICS public.t_st ON a, b FROM public.t;"
        "CREATE STATISTICS public.t_st2 ON (a + b), lower(c) FROM public.t;"
        "CREATE TABLE public.l (id int) PARTITION BY LIST ((id % 4));"
        "CREATE TABLE public.l_d PARTITION OF public.l DEFAULT;"
    )
    db.as_owner(f"GRANT SELECT ON public.m, public.t, public.l TO {make_url(db.reader).username}")
    assert _routes(db.report()) == []


@pytest.mark.postgres
def test_a_view_over_information_schema_starts_clean_and_one_over_a_never_readable_catalog_does_not(
    db: Db,
) -> None:
    # information_schema's views test privileges with current_user, so a view over them shows the
    # reader only its own objects' text; the walk stops there (it went on into pg_attrdef and
    # pg_constraint, and refused the operator's column list view). pg_indexes shows every
    # index's SQL: a view over it is still a route.
    reader = make_url(db.reader).username
    db.as_owner(
        "CREATE TABLE public.t (id int PRIMARY KEY, v text DEFAULT 'x');"
        "CREATE VIEW public.cols AS SELECT table_name, column_name, column_default"
        " FROM information_schema.columns WHERE table_schema = 'public';"
        "CREATE VIEW public.keys AS SELECT constraint_name, column_name"
        " FROM information_schema.key_column_usage;"
        f"GRANT SELECT ON public.t, public.cols, public.keys TO {reader}"
    )
    assert _routes(db.report()) == []
    db.as_owner(
        f"CREATE VIEW public.idx AS SELECT indexdef FROM pg_indexes; GRANT SELECT ON public.idx TO {reader}"
    )
    assert [line for line in _routes(db.report()) if "public.idx" in line]


@pytest.mark.postgres
def test_f1_a_function_added_to_a_trusted_extension_by_its_owner_is_judged_by_its_language(db: Db) -> None:
    with pg_admin(db.admin) as c:
        pg_need_extensions(c, "citext")
    db.as_owner(  # citext is trusted: the database owner (no superuser) installs it, then adds his own
        "CREATE EXTENSION citext;"
        "CREATE FUNCTION public.fmt_owner(text) RETURNS text LANGUAGE plpgsql STABLE AS $$ BEGIN"
        f" PERFORM pg_notify('mk_ran_{db.tag}', 'fmt_owner'); RETURN upper($1); END $$;"
        "ALTER EXTENSION citext ADD FUNCTION public.fmt_owner(text);"
        "CREATE TABLE public.accounts (id int, owner citext); INSERT INTO public.accounts VALUES (1, 'ann');"
        "CREATE VIEW public.acc_v WITH (security_invoker = on) AS"
        " SELECT id, public.fmt_owner(owner::text) AS o FROM public.accounts;"
        f"GRANT SELECT ON public.accounts, public.acc_v TO {make_url(db.reader).username}"
    )
    db.as_reader("SELECT o FROM public.acc_v")  # as found, the route is real
    assert db.drain() == ["fmt_owner"]
    report = db.report()
    assert db.drain() == []  # the check itself ran nothing
    lines = _routes(report)
    assert any("function public.fmt_owner(text) is written in plpgsql" in ln for ln in lines), lines
    assert not [ln for ln in lines if "citext" in ln], lines  # the extension's own members still pass
    with pytest.raises(SqlConfigError, match=r"public\.fmt_owner"):
        ensure_safe_account(report)
    for f in report.findings:
        if f.code in ROUTE_CODES:
            db.as_owner(f.fix)
    assert _routes(db.report()) == []
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        db.as_reader("SELECT o FROM public.acc_v")  # after the fix, PostgreSQL refuses the call
    assert db.drain() == []
