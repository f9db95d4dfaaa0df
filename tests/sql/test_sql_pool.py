"""The connection pool keeps every per-call guarantee (issue 15).

Each test runs with one pooled connection, so consecutive calls provably share it (the backend
id is the same), and with admission switched off (test-only), so a call can try what admission
would refuse: leave a lock, a prepared statement, a variable, a setting, a temporary table, or a
changed database behind, and the next call looks for it through the same query path. The
control runs the same plant with the profile's reset replaced by a plain rollback: there the
state survives, so each test can fail. A connection that timed out, was interrupted or broke is
replaced, never reused.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy.engine import make_url
from sqlglot import exp

from mcpkit.sql.admission import Admitted
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout, SqlConfigError
from mcpkit.sql.identities import RoleEngine
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import DbEnv, mysql_admin, pg_admin


def _passthrough(sql: str, dialect: str, **_: Any) -> Admitted:
    return Admitted(sql=sql, tree=exp.Select())


def _service(engine: SqlEngine, timeout_s: float = 10.0) -> SqlService:
    service = SqlService(engine, timeout_s=timeout_s, catalog=None, cells=None)
    service._admit = _passthrough  # type: ignore[method-assign]
    return service


def _one(service: SqlService, sql: str) -> Any:
    """The first cell of the answer, or `error:<kind>` when the database refused."""
    try:
        result, _ = service.query(sql, call_id=secrets.token_hex(16), max_rows=5)
    except QueryFailed as exc:
        return f"error:{exc.kind}"
    return result.rows[0][0] if result.rows else None


def _without_reset(engine: SqlEngine) -> None:
    """The control: a pool whose reset is only a rollback (what the pool must do better than)."""
    engine.profile.reset = lambda dbapi, url: dbapi.rollback()  # type: ignore[method-assign]


@pytest.fixture
def pooled(request: pytest.FixtureRequest) -> Iterator[Callable[[str], SqlEngine]]:
    engines: list[SqlEngine] = []

    def make(url: str) -> SqlEngine:
        engine = SqlEngine(url, pool_size=1, grace_s=0.3)
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.close()


_LEAK_ARGS = ("name", "plant", "probe", "clean", "survives")
_ADVISORY = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"

# --- PostgreSQL --------------------------------------------------------------------------------

# (name, plant, probe, clean answer, survives a plain rollback)
PG_LEAKS = [
    ("advisory-lock", "SELECT pg_advisory_lock(4242001)",
     "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()", 0, True),
    ("prepare", "PREPARE mk_leak AS SELECT 1",
     "SELECT count(*) FROM pg_prepared_statements WHERE name = 'mk_leak'", 0, True),
    ("set-config-session", "SELECT set_config('mk.leak', 'planted', false)",
     "SELECT coalesce(current_setting('mk.leak', true), '')", "", False),
    ("read-only-off", "SELECT set_config('default_transaction_read_only', 'off', false)",
     "SELECT current_setting('transaction_read_only')", "on", False),
    ("application-name", "SELECT set_config('application_name', 'planted', false)",
     "SELECT current_setting('application_name') LIKE 'mcpkit%'", True, False),
    ("with-hold-cursor", "DECLARE mk_leak CURSOR WITH HOLD FOR SELECT 1",
     "SELECT count(*) FROM pg_cursors WHERE name = 'mk_leak'", 0, False),
    ("listen", "LISTEN mk_leak", "SELECT count(*) FROM pg_listening_channels()", 0, False),
]  # fmt: skip


@pytest.mark.postgres
@pytest.mark.parametrize(_LEAK_ARGS, PG_LEAKS, ids=[c[0] for c in PG_LEAKS])
def test_pg_a_call_leaves_nothing_for_the_next(
    pg_env: DbEnv, pooled: Callable[[str], SqlEngine], name: str, plant: str, probe: str, clean: Any,
    survives: bool,
) -> None:  # fmt: skip
    service = _service(pooled(pg_env.ro_url))
    pid = _one(service, "SELECT pg_backend_pid()")
    _one(service, plant)
    assert _one(service, probe) == clean, name
    assert _one(service, "SELECT pg_backend_pid()") == pid, "not the same pooled connection"

    control = _service(pooled(pg_env.ro_url))
    _without_reset(control.engine)  # type: ignore[arg-type]
    _one(control, plant)
    if survives:
        assert _one(control, probe) != clean, f"{name}: the plant did not survive a rollback"


@pytest.mark.postgres
def test_pg_a_role_taken_on_in_one_call_is_gone_in_the_next(
    pg_env: DbEnv, pooled: Callable[[str], SqlEngine]
) -> None:
    roles = [f"mk_pool_role_{secrets.token_hex(4)}" for _ in range(2)]
    with pg_admin(pg_env.admin_url) as c:
        for role in roles:
            c.execute(f"CREATE ROLE {role} NOLOGIN")
            c.execute(f"GRANT {role} TO {pg_env.ro_user}")
    base = pooled(pg_env.ro_url)
    engines = [RoleEngine(base, role) for role in roles]
    try:
        as_role = _service(engines[0])
        pid = _one(as_role, "SELECT pg_backend_pid()")
        assert _one(as_role, "SELECT current_user") == roles[0]
        _one(as_role, "SELECT pg_advisory_lock(4242002)")
        _one(as_role, f"SELECT set_config('role', '{roles[1]}', false)")  # --allow shared-login's risk
        assert _one(as_role, "SELECT current_user") == roles[0]
        assert _one(as_role, _ADVISORY) == 0
        assert _one(as_role, "SELECT pg_backend_pid()") == pid, "not the same pooled connection"
        # Each role has a pool of its own: another role's call never gets this connection.
        assert _one(_service(engines[1]), "SELECT pg_backend_pid()") != pid
        assert _one(_service(base), "SELECT current_user") == pg_env.ro_user
    finally:
        for engine in engines:
            engine.close()
        base.close()
        with pg_admin(pg_env.admin_url) as c:
            for role in roles:
                c.execute(f"DROP ROLE {role}")


@pytest.mark.postgres
def test_pg_one_role_cannot_starve_another(pg_env: DbEnv) -> None:
    """Red team (pool) break 2: with --allow shared-login, one principal held the shared pool."""
    roles = [f"mk_pool_starve_{secrets.token_hex(4)}" for _ in range(2)]
    with pg_admin(pg_env.admin_url) as c:
        for role in roles:
            c.execute(f"CREATE ROLE {role} NOLOGIN")
            c.execute(f"GRANT {role} TO {pg_env.ro_user}")
    base = SqlEngine(pg_env.ro_url, pool_size=1, pool_wait_s=0.5)
    greedy, other = RoleEngine(base, roles[0]), RoleEngine(base, roles[1])
    try:
        with greedy.session(10.0, "holds-its-only-connection"):
            started = time.monotonic()
            assert other.execute("SELECT current_user", None, 1, 5.0, "other").rows == ((roles[1],),)
            assert time.monotonic() - started < 0.5, "the other role waited for a connection"
            with pytest.raises(QueryFailed) as busy:
                greedy.execute("SELECT 1", None, 1, 5.0, "greedy-again")
            assert busy.value.kind == "resource"  # a role's own pool is bounded
            assert base.execute("SELECT 1", None, 1, 5.0, "account").rows == ((1,),)
    finally:
        for engine in (greedy, other, base):
            engine.close()
        with pg_admin(pg_env.admin_url) as c:
            for role in roles:
                c.execute(f"DROP ROLE {role}")


@pytest.mark.postgres
def test_pg_each_login_has_its_own_pool(pg_env: DbEnv, pooled: Callable[[str], SqlEngine]) -> None:
    base = pooled(pg_env.ro_url)
    other = base.for_login(pg_env.rw_user, None)
    try:
        assert other.pool_size == base.pool_size == 1
        a, b = _service(base), _service(other)
        assert _one(a, "SELECT session_user") == pg_env.ro_user
        assert _one(b, "SELECT session_user") == pg_env.rw_user
        assert _one(a, "SELECT pg_backend_pid()") != _one(b, "SELECT pg_backend_pid()")
    finally:
        other.close()


@pytest.mark.postgres
def test_pg_a_timed_out_connection_is_not_reused(pg_env: DbEnv, pooled: Callable[[str], SqlEngine]) -> None:
    service = _service(pooled(pg_env.ro_url), timeout_s=0.5)
    pid = _one(service, "SELECT pg_backend_pid()")
    with pytest.raises(QueryTimeout):
        service.query("SELECT pg_sleep(5)", call_id="slow", max_rows=1)
    assert _one(service, "SELECT pg_backend_pid()") != pid


@pytest.mark.postgres
def test_pg_an_interrupted_connection_is_not_reused(
    pg_env: DbEnv, pooled: Callable[[str], SqlEngine]
) -> None:
    engine = pooled(pg_env.ro_url)
    begin = engine.profile.begin
    # The database's own timeout is pushed far out, so only the watchdog's cancel can stop it.
    engine.profile.begin = lambda dbapi, timeout_s, call_id: begin(dbapi, 60.0, call_id)  # type: ignore[method-assign]
    service = _service(engine, timeout_s=0.5)
    pid = _one(service, "SELECT pg_backend_pid()")
    started = time.monotonic()
    with pytest.raises(QueryTimeout):
        service.query("SELECT pg_sleep(8)", call_id="slow", max_rows=1)
    assert time.monotonic() - started < 6, "the watchdog did not interrupt the statement"
    assert _one(service, "SELECT pg_backend_pid()") != pid


@pytest.mark.postgres
def test_pg_a_broken_connection_is_replaced(pg_env: DbEnv, pooled: Callable[[str], SqlEngine]) -> None:
    service = _service(pooled(pg_env.ro_url))
    pid = _one(service, "SELECT pg_backend_pid()")
    with pg_admin(pg_env.admin_url) as c:
        c.execute("SELECT pg_terminate_backend(%s)", [pid])
    time.sleep(0.2)
    fresh = _one(service, "SELECT pg_backend_pid()")
    assert isinstance(fresh, int) and fresh != pid


# --- MariaDB -----------------------------------------------------------------------------------

# (name, plant, probe, clean answer, survives a plain rollback)
MY_LEAKS = [
    ("user-variable", "SELECT @mk_leak := 42", "SELECT @mk_leak", None, True),
    ("get-lock", "SELECT GET_LOCK('{lock}', 0)", "SELECT IS_USED_LOCK('{lock}')", None, True),
    ("session-variable", "SET SESSION div_precision_increment = 7",
     "SELECT @@SESSION.div_precision_increment = 7", 0, True),
    ("prepare", "PREPARE mk_leak FROM 'SELECT 42'", "EXECUTE mk_leak", "error:undefined_object", True),
    # Each call selects the login's database again (it also re-reads the privileges on it).
    ("use-database", "USE information_schema", "SELECT DATABASE()", "{db}", False),
    # Refused inside the READ ONLY transaction (1792), so there is nothing to survive.
    ("temporary-table", "CREATE TEMPORARY TABLE mk_leak (a INT)", "SELECT COUNT(*) FROM mk_leak",
     "error:undefined_object", False),
]  # fmt: skip


@pytest.mark.mysql
@pytest.mark.parametrize(_LEAK_ARGS, MY_LEAKS, ids=[c[0] for c in MY_LEAKS])
def test_mysql_a_call_leaves_nothing_for_the_next(
    mysql_env: DbEnv, pooled: Callable[[str], SqlEngine], name: str, plant: str, probe: str, clean: Any,
    survives: bool,
) -> None:  # fmt: skip
    lock = f"mk_pool_{secrets.token_hex(4)}"
    plant, probe = plant.format(lock=lock), probe.format(lock=lock)
    clean = clean.format(db=mysql_env.schema) if isinstance(clean, str) else clean
    service = _service(pooled(mysql_env.ro_url))
    conn_id = _one(service, "SELECT CONNECTION_ID()")
    _one(service, plant)
    assert _one(service, "SELECT CONNECTION_ID()") == conn_id, "not the same pooled connection"
    assert _one(service, probe) == clean, name

    control = _service(pooled(mysql_env.ro_url))
    _without_reset(control.engine)  # type: ignore[arg-type]
    _one(control, plant)
    if survives:
        assert _one(control, probe) != clean, f"{name}: the plant did not survive a rollback"


@pytest.mark.mysql
def test_mysql_text_survives_the_reset(mysql_env: DbEnv, pooled: Callable[[str], SqlEngine]) -> None:
    service = _service(pooled(mysql_env.ro_url))
    for _ in range(3):  # the reset keeps the handshake's character set
        assert _one(service, "SELECT 'é ✓ 東京'") == "é ✓ 東京"


@pytest.mark.mysql
def test_mysql_a_timed_out_connection_is_not_reused(
    mysql_env: DbEnv, pooled: Callable[[str], SqlEngine]
) -> None:
    service = _service(pooled(mysql_env.ro_url), timeout_s=0.5)
    conn_id = _one(service, "SELECT CONNECTION_ID()")
    with pytest.raises(QueryTimeout):
        service.query("SELECT SLEEP(5)", call_id="slow", max_rows=1)
    assert _one(service, "SELECT CONNECTION_ID()") != conn_id


@pytest.mark.mysql
def test_mysql_a_killed_connection_is_replaced(mysql_env: DbEnv, pooled: Callable[[str], SqlEngine]) -> None:
    service = _service(pooled(mysql_env.ro_url))
    conn_id = _one(service, "SELECT CONNECTION_ID()")
    admin = mysql_admin(mysql_env.admin_url)
    try:
        with admin.cursor() as c:
            c.execute("KILL %s", [conn_id])
    finally:
        admin.close()
    time.sleep(0.2)
    fresh = _one(service, "SELECT CONNECTION_ID()")
    assert isinstance(fresh, int) and fresh != conn_id


# --- SQLite ------------------------------------------------------------------------------------

SQLITE_PLANTS = [
    "CREATE TEMP TABLE mk_leak (a)",
    "PRAGMA query_only = 0",
    "ATTACH DATABASE ':memory:' AS mk_leak",
    "PRAGMA temp_store = MEMORY",
]


@pytest.mark.parametrize("plant", SQLITE_PLANTS)
def test_sqlite_a_call_cannot_change_its_connection(
    sqlite_env: DbEnv, pooled: Callable[[str], SqlEngine], plant: str
) -> None:
    engine = pooled(sqlite_env.ro_url)
    service = _service(engine)
    assert _one(service, plant).startswith("error:")  # the authorizer, inside SQLite
    with engine.session(5.0, "look") as (_, dbapi):
        assert dbapi.execute("SELECT count(*) FROM temp.sqlite_master").fetchone() == (0,)


def test_sqlite_a_connection_that_kept_state_is_not_reused(
    sqlite_env: DbEnv, pooled: Callable[[str], SqlEngine]
) -> None:
    engine = pooled(sqlite_env.ro_url)
    with engine.session(5.0, "plant") as (_, dbapi):
        first = id(dbapi)
        dbapi.set_authorizer(None)  # as if the authorizer had let it through
        dbapi.execute("PRAGMA query_only = 0")
        dbapi.execute("CREATE TEMP TABLE mk_leak (a)")
    with engine.session(5.0, "look") as (_, dbapi):
        assert id(dbapi) != first, "the reset did not notice the temp table"
        assert dbapi.execute("SELECT count(*) FROM temp.sqlite_master").fetchone() == (0,)
    with engine.session(5.0, "again") as (_, again):
        reused = id(again)
    with engine.session(5.0, "again") as (_, again):
        assert id(again) == reused, "a clean connection should be reused"


def test_sqlite_a_timed_out_connection_is_not_reused(
    sqlite_env: DbEnv, pooled: Callable[[str], SqlEngine]
) -> None:
    engine = pooled(sqlite_env.ro_url)
    service = _service(engine, timeout_s=0.3)
    with engine.session(5.0, "first") as (_, dbapi):
        first = id(dbapi)
    forever = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
    with pytest.raises(QueryTimeout):
        service.query(forever, call_id="slow", max_rows=1)
    with engine.session(5.0, "after") as (_, dbapi):
        assert id(dbapi) != first


# --- the pool itself ---------------------------------------------------------------------------


def test_pool_size_is_validated_and_zero_means_no_pool(sqlite_env: DbEnv) -> None:
    with pytest.raises(SqlConfigError, match="pool-size"):
        SqlEngine(sqlite_env.ro_url, pool_size=-1)
    engine = SqlEngine(sqlite_env.ro_url, pool_size=0)
    try:
        with engine.session(5.0, "a") as (_, dbapi):
            first = dbapi
        with engine.session(5.0, "b") as (_, dbapi):
            assert dbapi is not first
    finally:
        engine.close()


@pytest.mark.postgres
def test_pg_concurrent_calls_share_the_pool_and_all_answer(pg_env: DbEnv) -> None:
    engine = SqlEngine(pg_env.ro_url, pool_size=2)
    service = _service(engine)
    pids: list[Any] = []
    try:
        workers = [
            threading.Thread(target=lambda: pids.append(_one(service, "SELECT pg_backend_pid()")))
            for _ in range(12)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join(30)
        assert len(pids) == 12 and all(isinstance(p, int) for p in pids)
        assert len(set(pids)) <= 2
    finally:
        engine.close()


def _ro_plain(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def test_watchdog_disarm_waits_for_an_interrupt_under_way() -> None:
    from mcpkit.sql.engines import watchdog

    ran: list[str] = []

    def slow_interrupt() -> None:
        time.sleep(0.3)
        ran.append("done")

    alarm = watchdog.arm(0.05, slow_interrupt)
    time.sleep(0.15)
    assert alarm.disarm() is True and ran == ["done"], "disarm returned before the interrupt ended"
    never = watchdog.arm(5.0, lambda: ran.append("never"))
    assert never.disarm() is False
    soon = watchdog.arm(0.01, lambda: ran.append("soon"))  # due before the disarmed one
    time.sleep(0.3)
    assert soon.disarm() is True and ran == ["done", "soon"]


def test_a_call_that_finds_every_connection_busy_fails_as_resource(sqlite_env: DbEnv) -> None:
    engine = SqlEngine(sqlite_env.ro_url, pool_size=1, pool_wait_s=0.2)
    try:
        with engine.session(5.0, "holds-the-only-connection"), pytest.raises(QueryFailed) as failed:
            engine.execute("SELECT 1", None, 1, 5.0, "waits")
        assert failed.value.kind == "resource"
        assert engine.execute("SELECT 1", None, 1, 5.0, "after").rows == ((1,),)
    finally:
        engine.close()


@pytest.mark.postgres
def test_pg_a_revoke_reaches_a_pooled_connection(pg_env: DbEnv, pooled: Callable[[str], SqlEngine]) -> None:
    table = f"{pg_env.schema}.mk_revoke_{secrets.token_hex(4)}"
    with pg_admin(pg_env.admin_url) as c:
        c.execute(f"CREATE TABLE {table} AS SELECT 1 AS n")
        c.execute(f"GRANT SELECT ON {table} TO {pg_env.ro_user}")
    try:
        service = _service(pooled(pg_env.ro_url))
        pid = _one(service, "SELECT pg_backend_pid()")
        assert _one(service, f"SELECT n FROM {table}") == 1
        with pg_admin(pg_env.admin_url) as c:
            c.execute(f"REVOKE SELECT ON {table} FROM {pg_env.ro_user}")
        assert _one(service, f"SELECT n FROM {table}") == "error:permission"
        assert _one(service, "SELECT pg_backend_pid()") == pid, "not the same pooled connection"
    finally:
        with pg_admin(pg_env.admin_url) as c:
            c.execute(f"DROP TABLE {table}")


def test_sqlite_earlier_calls_statements_are_not_visible(
    sqlite_env: DbEnv, pooled: Callable[[str], SqlEngine]
) -> None:
    """Red team (pool) break 1: sqlite_stmt listed the previous call's SQL on a pooled connection."""
    engine = pooled(sqlite_env.ro_url)
    admitted = SqlService(engine, timeout_s=5.0)  # the real admission: it lets sqlite_stmt through
    secret = f"private-lookup-{secrets.token_hex(4)}"
    admitted.query(f"SELECT region FROM sales_demo WHERE region = '{secret}'", call_id="first", max_rows=1)
    for service in (admitted, _service(engine)):
        assert _one(service, "SELECT sql FROM sqlite_stmt") == "error:permission"  # a refused read
    with engine.session(5.0, "look") as (_, dbapi):
        first = id(dbapi)
        dbapi.set_authorizer(None)  # as if the authorizer had let it through: nothing is cached
        held = dbapi.execute("SELECT sql FROM sqlite_stmt").fetchall()
    assert held and not any(secret in str(row) for row in held), held
    with engine.session(5.0, "same") as (_, dbapi):
        assert id(dbapi) == first, "not the same pooled connection"
