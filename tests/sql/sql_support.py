"""Helpers for the SQL tests: corpus files, state snapshots of the real databases, outcomes."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest
from mcp import Client, StdioServerParameters
from sqlalchemy.engine import make_url

from mcpkit.cli import main
from mcpkit.sql.engines.engine import DEFAULT_POOL_SIZE, SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.profiles.base import ConnectionBudget
from mcpkit.sql.service import SqlService
from tests.conftest import need
from tests.helpers import ROOT, UNBOUNDED_MEMORY

HERE = Path(__file__).resolve().parent
READER_CONNECTIONS = ConnectionBudget(DEFAULT_POOL_SIZE).recommended
"""MAX_USER_CONNECTIONS of the test logins: what serve checks for one source at the default pool."""
CORPUS = HERE / "corpus"


@dataclass
class Case:
    """One corpus entry: `-- name:` header lines, then SQL up to the next `-- name:`."""

    name: str
    sql: str
    meta: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.name


def load_corpus(filename: str) -> list[Case]:
    """Parse a corpus file: blocks opened by `-- name: x`, with more `-- key: value` lines."""
    cases: list[Case] = []
    current: Case | None = None
    body: list[str] = []

    def close() -> None:
        if current is not None:
            current.sql = "\n".join(body).strip()
            cases.append(current)

    for line in (CORPUS / filename).read_text(encoding="utf-8").splitlines():
        if line.startswith("-- name:"):
            close()
            current, body = Case(line.split(":", 1)[1].strip(), ""), []
        elif current is not None and not body and line.startswith("-- ") and ":" in line:
            key, value = line[3:].split(":", 1)
            current.meta[key.strip()] = value.strip()
        elif current is not None:
            body.append(line)
    close()
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), f"duplicate case names in {filename}"
    return cases


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, default=str, sort_keys=True).encode()).hexdigest()


def files_of(folder: Path) -> list[tuple[str, int, str]]:
    """Every file under `folder`: name, size, content hash."""
    out = []
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            out.append(
                (str(p.relative_to(folder)), p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
            )
    return out


@dataclass
class DbEnv:
    """One test database: admin URL, a read-only account, a write-capable account, a canary dir."""

    dialect: str
    admin_url: str
    ro_url: str
    rw_url: str
    schema: str
    ro_user: str
    rw_user: str
    canary: Path


_PG_QUERIES = {
    "relations": "SELECT c.relname, c.relkind, c.relacl::text FROM pg_class c JOIN pg_namespace n"
    " ON n.oid = c.relnamespace WHERE n.nspname = %(s)s ORDER BY 1",
    "functions": "SELECT p.proname, md5(p.prosrc), p.provolatile FROM pg_proc p JOIN pg_namespace n"
    " ON n.oid = p.pronamespace WHERE n.nspname = %(s)s ORDER BY 1, 2",
    "role_settings": "SELECT setrole::regrole::text, setdatabase, setconfig::text FROM pg_db_role_setting"
    " ORDER BY 1, 2",
    "roles": "SELECT rolname, rolsuper, rolcreaterole, rolcreatedb, rolcanlogin, rolconfig::text"
    " FROM pg_roles ORDER BY 1",
    "memberships": "SELECT roleid::regrole::text, member::regrole::text FROM pg_auth_members ORDER BY 1, 2",
    "schemas": "SELECT nspname, nspacl::text FROM pg_namespace ORDER BY 1",
    "large_objects": "SELECT count(*) FROM pg_largeobject_metadata",
    "advisory_locks": "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'",
    "stats_reset": "SELECT stats_reset FROM pg_stat_database WHERE datname = current_database()",
    "prepared_xacts": "SELECT count(*) FROM pg_prepared_xacts",
    "slots": "SELECT slot_name FROM pg_replication_slots ORDER BY 1",
    "file_settings": "SELECT name, setting FROM pg_file_settings ORDER BY 1, 2",
    "extensions": "SELECT extname FROM pg_extension ORDER BY 1",
    "databases": "SELECT datname FROM pg_database ORDER BY 1",
    # The one cluster-wide file check: the data directory's top-level entries (COPY TO, lo_export
    # or an adminpack write would add one). The test user cannot read the directory itself; the
    # administrator lists it. Nothing else on a shared server adds names there.
    "data_directory": "SELECT f FROM pg_ls_dir('.') AS f ORDER BY 1",
    "sequence": None,
}


@contextmanager
def service_over(url: str, timeout_s: float) -> Iterator[SqlService]:
    """A `SqlService` over `url` on an engine of its own, closed afterwards."""
    engine = SqlEngine(url)
    try:
        yield SqlService(engine, timeout_s=timeout_s)
    finally:
        engine.close()


def masked_service(
    url: str, masks: str | Path, allow: Sequence[str] = (), *, max_rows: int = 50, timeout_s: float = 10.0
) -> SqlService:
    """What `serve --mask` does at start-up (`assemble.equip`): the masks file read against the
    database, the masked columns withheld, views, functions and scan orders checked (`allow`: the
    `--allow` opt-ins), names pinned to the path the analysis resolved; a `SqlService` on an engine
    of its own (the caller closes `service.engine`).

    Raises:
        SqlConfigError: start-up refused (the engine is closed).
    """
    # imported here: every conftest imports this module, also over an old source tree (its recipe)
    from mcpkit.sql.maskcheck import enforce_masks, ordered_schema, prepare_masks
    from mcpkit.sql.service import Masking

    engine = SqlEngine(url)
    try:
        policy, reflection, masked = prepare_masks(engine, str(masks))
        enforce_masks(engine, masked)
        known = ordered_schema(engine, reflection, policy, masked, tuple(allow))
        if known.path:
            engine.profile.pin_name_path(known.path)
    except BaseException:
        engine.close()
        raise
    return SqlService(engine, max_rows=max_rows, timeout_s=timeout_s, masking=Masking(policy, known, masked))


def pg_service_fixture(timeout_s: float) -> Any:
    """A `service` fixture: a `SqlService` over `pg_url` (the test superuser) with this timeout."""

    @pytest.fixture
    def service(pg_url: str) -> Iterator[SqlService]:
        with service_over(pg_url, timeout_s) as service:
            yield service

    return service


@asynccontextmanager
async def serving_masked(
    dsn: str, masks: Path, clustered: tuple[str, ...] = ("customers",)
) -> AsyncIterator[Callable[[str], Any]]:
    """`mcpkit sql serve --mask` over stdio, the catalog checked before every call; yields
    `ask(sql)`, an `execute_query` call."""
    args = [
        "-m",
        "mcpkit",
        "sql",
        "serve",
        "--dsn",
        dsn,
        "--mask",
        str(masks),
        "--no-audit",
        *UNBOUNDED_MEMORY,
        # `pg_customers` CLUSTERs on the masked e-mail (the twins need that order): accepted
        *(a for table in clustered for a in ("--allow", f"clustered-order:{table}")),
    ]
    params = StdioServerParameters(
        command=sys.executable, args=[*args, "--catalog-check-interval", "0"], cwd=str(ROOT)
    )
    async with Client(params, mode="legacy") as client:

        async def ask(sql: str) -> Any:
            return await client.call_tool("execute_query", {"query": sql})

        yield ask


def masks_file(folder: Path, *rules: str) -> str:
    """A masks file in `folder` masking `rules` (`table.column`), for `--mask`."""
    path = folder / "masks.yaml"
    path.write_text("masks:\n" + "".join(f"  - {r}\n" for r in rules), encoding="utf-8")
    return str(path)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """`mcpkit ARGV` in this process: its exit code and what it printed (stdout, then stderr).

    With `--mask`, `pg_customers`' CLUSTER on the masked e-mail index is accepted
    (`--allow clustered-order:customers`): the twins that need that scan order are its point."""
    if argv[:2] in (("sql", "query"), ("sql", "serve")) and "--mask" in argv:
        argv = (*argv[:2], "--allow", "clustered-order:customers", *argv[2:])
    try:
        code = main(list(argv))
    except SqlConfigError as exc:  # `mcpkit sql query` reports it and exits 2
        return 2, str(exc)
    out = capsys.readouterr()
    return code, out.out + out.err


def mcpkit_in_process(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, *argv: str
) -> tuple[int, str, str]:
    """`mcpkit ARGV` as `run_mcpkit` runs it, but in this process (a fresh interpreter costs 2-5 s
    each, far more on a loaded host): the exit code, stdout, and stderr followed by what it logged
    (pytest's handlers hold the root logger, so `basicConfig` adds no stderr one here). The levels
    `mcpkit sql` sets (doctor quiets `mcpkit.sql`) are put back: later tests see the usual ones."""
    caplog.clear()
    with logging_as_a_fresh_process():
        code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err + caplog.text


@contextmanager
def logging_as_a_fresh_process() -> Iterator[None]:
    """Run a command line in this process with the logging a fresh interpreter has: every `mcpkit`
    and `sqlglot` logger at NOTSET, enabled, with no handler of its own; then every logger's level,
    handlers and switches as they were. What one run configures (an INFO handler on `mcpkit.calls`,
    doctor's quiet `mcpkit.sql`) neither hides a later run's warnings nor keeps later tests' records
    in memory (test_sessions counts them as a leak)."""
    manager = logging.Logger.manager
    before = {name: lg for name, lg in manager.loggerDict.items() if isinstance(lg, logging.Logger)}
    saved = [(lg, lg.level, list(lg.handlers), lg.disabled, lg.propagate) for lg in before.values()]
    root = logging.getLogger()
    saved.append((root, root.level, list(root.handlers), root.disabled, root.propagate))
    for name, lg in before.items():
        if name.split(".")[0] in ("mcpkit", "sqlglot"):
            lg.setLevel(logging.NOTSET)
            lg.handlers[:], lg.disabled, lg.propagate = [], False, True
    try:
        yield
    finally:
        for name, lg in list(manager.loggerDict.items()):
            if isinstance(lg, logging.Logger) and name not in before:  # made by the run
                lg.setLevel(logging.NOTSET)
                lg.handlers[:], lg.disabled, lg.propagate = [], False, True
        for lg, level, handlers, disabled, propagate in saved:
            lg.setLevel(level)
            lg.handlers[:], lg.disabled, lg.propagate = handlers, disabled, propagate


def mcpkit_here(*argv: str) -> subprocess.CompletedProcess[str]:
    """`run_mcpkit(*argv)` without the fresh interpreter (2-5 s each, far more on a loaded host): `mcpkit
    ARGV` in this process, its exit code (argparse's SystemExit too), what it printed, and on stderr
    what it logged as the command line would (WARNING, INFO with --verbose). The levels `mcpkit sql`
    sets (doctor quiets `mcpkit.sql`) are put back: later tests see the usual ones."""
    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)
    handler.setLevel(logging.INFO if {"-v", "--verbose"} & set(argv) else logging.WARNING)
    with logging_as_a_fresh_process(), redirect_stdout(out), redirect_stderr(err):
        logging.getLogger().addHandler(handler)  # taken off with the rest of the run's logging
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(["mcpkit", *argv], code, out.getvalue(), err.getvalue())


def answer_or_refused(service: SqlService, sql: str) -> str:
    """The first column's values, sorted and printed, or `refused`: one comparable string per query."""
    from mcpkit.errors import Refused

    try:
        result, _ = service.query(sql, call_id="t")
    except Refused:
        return "refused"
    return str(sorted(str(r[0]) for r in result.rows))


def rows_or_message(service: SqlService, sql: str) -> object:
    """The rows a query answers, or the sentence of the tool error it raised."""
    from mcpkit.errors import ToolError

    try:
        result, _ = service.query(sql, call_id="t")
    except ToolError as exc:
        return str(exc)
    return result.rows


def rss_kb() -> int:
    """This process's resident memory (VmRSS), in KiB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def pg_admin(url: str) -> psycopg.Connection:
    """An autocommit psycopg connection as the test superuser."""
    plain = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    return psycopg.connect(plain, autocommit=True)


def pg_need_extensions(conn: psycopg.Connection[Any], *names: str) -> None:
    """Skip (fail under CI=true, `conftest.need`) unless the server offers every extension of `names`:
    a build without contrib (pgserver's PostgreSQL 16.2 has plpgsql and vector alone) or libxml."""
    offered = {r[0] for r in conn.execute("SELECT name FROM pg_available_extensions").fetchall()}
    if missing := [n for n in names if n not in offered]:
        need(f"PostgreSQL extension {', '.join(missing)}", "this server's build does not offer it (contrib)")


def pg_has_libxml(url: str) -> bool:
    """Whether the server was built with libxml (`xml`, `xmlparse`, `query_to_xml` work)."""
    with pg_admin(url) as c:
        try:
            c.execute("SELECT xmlparse(content '<a/>')")
        except psycopg.errors.FeatureNotSupported:
            return False
    return True


def mysql_admin(url: str) -> pymysql.Connection:  # type: ignore[type-arg]
    """An autocommit pymysql connection as the test's MariaDB administrator."""
    u = make_url(url)
    return pymysql.connect(
        host=u.host or "127.0.0.1",
        port=u.port or 3306,
        user=u.username or "root",
        password=u.password or "",
        autocommit=True,
    )


def pg_drop_schema_and_roles(admin: psycopg.Connection, schema: str, roles: Sequence[str]) -> None:
    """End the roles' sessions, drop `schema` with everything in it, then the roles."""
    admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ANY(%s)", [list(roles)]
    )
    admin.execute(f"DROP SCHEMA {schema} CASCADE")
    for role in roles:
        admin.execute(f"DROP OWNED BY {role}")
        admin.execute(f"DROP ROLE {role}")


@dataclass(frozen=True)
class MysqlScratch:
    """A database of one test's own and a reader login on it (password `pw`, no grants yet)."""

    admin: pymysql.Connection  # type: ignore[type-arg]
    db: str
    reader: str
    admin_url: str
    reader_url: str


@contextmanager
def mysql_scratch(mysql_url: str, prefix: str) -> Iterator[MysqlScratch]:
    """Create `mk_<prefix>_<tag>` and its reader `mk_<prefix>_<tag>_r`; drop both afterwards."""
    tag = secrets.token_hex(4)
    db, reader = f"mk_{prefix}_{tag}", f"mk_{prefix}_{tag}_r"
    admin = mysql_admin(mysql_url)
    base = make_url(mysql_url).set(database=db)
    try:
        with admin.cursor() as c:
            c.execute(f"CREATE DATABASE {db}")
            limit = f"MAX_USER_CONNECTIONS {READER_CONNECTIONS}"
            c.execute(f"CREATE USER '{reader}'@'%' IDENTIFIED BY 'pw' WITH {limit}")
        yield MysqlScratch(
            admin,
            db,
            reader,
            base.render_as_string(hide_password=False),
            base.set(username=reader, password="pw").render_as_string(hide_password=False),
        )
    finally:
        with admin.cursor() as c:
            c.execute(f"DROP DATABASE IF EXISTS {db}")
            c.execute(f"DROP USER IF EXISTS '{reader}'@'%'")
        admin.close()


@dataclass
class PgScratch:
    """A PostgreSQL database of one test's own and a login on the server (password `pw`, no grants).

    `admin` is an autocommit superuser connection to the scratch database.
    """

    admin: psycopg.Connection  # type: ignore[type-arg]
    db: str
    reader: str
    admin_url: str
    reader_url: str


@contextmanager
def pg_scratch(pg_url: str, prefix: str) -> Iterator[PgScratch]:
    """Create database `mk_<prefix>_<tag>` and login `mk_<prefix>_<tag>_r`; drop both afterwards.

    The login has the connection limit a reader gets from `mcpkit sql grant` for the default pool.
    Dropping the database (`WITH (FORCE)`) takes the login's grants and per-database settings in it.
    """
    tag = secrets.token_hex(4)
    db, reader = f"mk_{prefix}_{tag}", f"mk_{prefix}_{tag}_r"
    base = make_url(pg_url).set(database=db)
    admin_url = base.render_as_string(hide_password=False)
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE DATABASE {db}")
        c.execute(f"CREATE ROLE {reader} LOGIN PASSWORD 'pw' CONNECTION LIMIT {READER_CONNECTIONS}")
    admin = None
    try:
        admin = pg_admin(admin_url)
        yield PgScratch(
            admin,
            db,
            reader,
            admin_url,
            base.set(username=reader, password="pw").render_as_string(hide_password=False),
        )
    finally:
        if admin is not None:
            admin.close()
        with pg_admin(pg_url) as c:
            c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            c.execute(f"DROP ROLE IF EXISTS {reader}")


CUSTOMERS_SECRET = "@secret.example"
# Ids out of e-mail order: the e-mail ranking lists the ids 4, 1, 5, 2, 3.
CUSTOMERS_ROWS = [(1, "Ann", "b"), (2, "Bob", "d"), (3, "Cy", "e"), (4, "Dan", "a"), (5, "Eve", "c")]


def _customer_values() -> str:
    return ", ".join(f"({i}, '{n}', '{e}{CUSTOMERS_SECRET}')" for i, n, e in CUSTOMERS_ROWS)


def pg_customers(db: PgScratch, *, unique: bool = True) -> None:
    """`customers (id, name, email)` of `CUSTOMERS_ROWS`, clustered on an index over `email` (so a
    scan answers the ids in e-mail order), `public` closed to PUBLIC, the reader granted `id, name`."""
    index = "UNIQUE INDEX" if unique else "INDEX"
    db.admin.execute(
        f"""
        REVOKE ALL ON SCHEMA public FROM PUBLIC;
        CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text NOT NULL);
        INSERT INTO customers VALUES {_customer_values()};
        CREATE {index} customers_email ON customers (email);
        CLUSTER customers USING customers_email;
        ANALYZE customers;
        GRANT USAGE ON SCHEMA public TO {db.reader};
        GRANT SELECT (id, name) ON customers TO {db.reader};
        """
    )


def mysql_customers(db: MysqlScratch, key: str = "UNIQUE KEY email_idx (email, id)") -> None:
    """`customers (id, name, email)` of `CUSTOMERS_ROWS` with the e-mail index `key` (covering `id`
    in InnoDB, so a scan of it answers the ids in e-mail order), the reader granted `id, name`."""
    with db.admin.cursor() as c:
        c.execute(
            f"CREATE TABLE {db.db}.customers (id int PRIMARY KEY, name varchar(20) NOT NULL,"
            f" email varchar(80) NOT NULL, {key})"
        )
        c.execute(f"INSERT INTO {db.db}.customers VALUES {_customer_values()}")
        c.execute(f"GRANT SELECT (id, name) ON {db.db}.customers TO '{db.reader}'@'%'")


def apply_grant(admin_url: str, login: str, script: str) -> str:
    """Run what `mcpkit sql grant` printed for `login` as the administrator; the login's URL."""
    with pg_admin(admin_url) as c:
        for line in script.splitlines():
            if line.strip() and not line.startswith("--"):
                c.execute(line.strip().rstrip(";"))
    password = script.split("PASSWORD '")[1].split("'")[0]
    return make_url(admin_url).set(username=login, password=password).render_as_string(False)


def pg_snapshot(admin_url: str, schema: str, canary: Path) -> dict[str, Any]:
    """Data, catalog, settings and files a successful attack on PostgreSQL would change."""
    url = make_url(admin_url).set(drivername="postgresql").render_as_string(hide_password=False)
    state: dict[str, Any] = {}
    with psycopg.connect(url, autocommit=True) as c:
        for key, q in _PG_QUERIES.items():
            if q:
                state[key] = c.execute(q, {"s": schema}).fetchall()
        state["sequence"] = c.execute(f"SELECT last_value, is_called FROM {schema}.canary_seq").fetchall()
        for name, kind, _acl in state["relations"]:
            if kind == "r":
                digest = "md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), ''))"
                state[f"data:{name}"] = c.execute(f"SELECT {digest} FROM {schema}.{name} t").fetchone()
    state["files"] = files_of(canary)
    return {k: _digest(v) for k, v in state.items()}


_MYSQL_VARIABLES = (
    "read_only",
    "general_log",
    "general_log_file",
    "slow_query_log",
    "sql_mode",
    "max_statement_time",
    "local_infile",
    "event_scheduler",
    "secure_file_priv",
    "max_connections",
    "log_output",
)


_MYSQL_QUERIES = {
    "routines": "SELECT ROUTINE_SCHEMA, ROUTINE_NAME FROM information_schema.ROUTINES",
    "triggers": "SELECT TRIGGER_SCHEMA, TRIGGER_NAME FROM information_schema.TRIGGERS",
    "events": "SELECT EVENT_SCHEMA, EVENT_NAME FROM information_schema.EVENTS",
    "users": "SELECT User, Host, Priv FROM mysql.global_priv",
    "db_grants": "SELECT * FROM mysql.db",
    "table_grants": "SELECT Host, Db, User, Table_name, Table_priv FROM mysql.tables_priv",
    "databases": "SHOW DATABASES",
}


def mysql_snapshot(admin_url: str, db: str, canary: Path) -> dict[str, Any]:
    """Data, catalog, grants, global settings and files a successful attack on MySQL would change."""
    u = make_url(admin_url)
    conn = pymysql.connect(host=u.host, port=u.port or 3306, user=u.username, password=u.password or "")
    state: dict[str, Any] = {}
    try:
        with conn.cursor() as c:
            c.execute(f"SHOW FULL TABLES FROM `{db}`")
            tables = sorted(c.fetchall())
            state["tables"] = tables
            if tables:
                c.execute("CHECKSUM TABLE " + ", ".join(f"`{db}`.`{t}`" for t, _ in tables) + " EXTENDED")
                state["checksums"] = sorted(c.fetchall())
            for key, q in _MYSQL_QUERIES.items():
                c.execute(q)
                state[key] = sorted(c.fetchall(), key=repr)
            c.execute("SHOW GLOBAL VARIABLES")
            state["variables"] = sorted(r for r in c.fetchall() if r[0] in _MYSQL_VARIABLES)
    finally:
        conn.close()
    state["files"] = files_of(canary)
    return {k: _digest(v) for k, v in state.items()}


def sqlite_snapshot(folder: Path) -> dict[str, Any]:
    """The database file and every file next to it (ATTACH, VACUUM INTO and journals would add some)."""
    return {"files": _digest(files_of(folder))}


def changed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The snapshot keys whose digest differs."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def assert_guarded_answers_alike(service: Any, sent: str, sql: str, rows: int, timeout_s: float) -> None:
    """The SQL admission sent (`sent`, its guards written in) and the query as written answer alike
    on `service`'s engine: the same column names and types, the same `rows` rows."""
    engine = service.engine
    guarded = engine.execute(sent, None, 100, timeout_s, "guarded")
    plain = engine.execute(sql, None, 100, timeout_s, "plain")
    assert [c.name for c in guarded.columns] == [c.name for c in plain.columns]
    assert [c.type_name for c in guarded.columns] == [c.type_name for c in plain.columns]
    assert guarded.rows == plain.rows and len(plain.rows) == rows


def row_order_routines(url: str) -> dict[tuple[str, str], str]:
    """The user functions the engine's profile counts as per-row (`Profile.row_order_routines`), read as
    the account of `url`, with why."""
    engine = SqlEngine(url)
    try:
        with engine.session(30.0, "test") as (conn, _):
            return engine.profile.row_order_routines(conn)
    finally:
        engine.close()
