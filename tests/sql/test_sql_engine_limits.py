"""Limits the engine itself enforces, with admission switched off (test-only passthrough).

SQLite: SQLITE_LIMIT_LENGTH stops a step that would build gigabytes; printf's width and precision
are bounded (its `%.*c` loop runs 30 s in one VM step otherwise, where no progress handler runs);
the authorizer refuses functions the policy does not admit. MariaDB: a recursive CTE that hits
the recursion cap is an error, never a truncated `COUNT(*) = 1001`.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url
from sqlglot import exp

from mcpkit.errors import Refused
from mcpkit.sql.admission import Admitted, FunctionPolicy
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout
from mcpkit.sql.profiles.base import ConnectionBudget
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import DbEnv, mysql_admin, mysql_scratch, pg_scratch, rss_kb

TIMEOUT_S = 3.0


def _passthrough(sql: str, dialect: str, **_: Any) -> Admitted:
    return Admitted(sql=sql, tree=exp.Select())


def _raw(env: DbEnv, functions: FunctionPolicy | None = None) -> SqlService:
    service = SqlService(SqlEngine(env.ro_url), timeout_s=TIMEOUT_S, functions=functions)
    service._admit = _passthrough
    return service


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT length(printf('%.*c', 2000000000, 'x'))",
        "SELECT length(format('%2000000000d', 1))",
        "SELECT length(zeroblob(2000000000))",
        "SELECT length(randomblob(2000000000))",
        "SELECT length(replace(hex(zeroblob(20000000)), '0', '0000000000'))",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5000)"
        " SELECT length(group_concat(hex(zeroblob(10000)))) FROM r",
    ],
)
def test_sqlite_no_step_builds_gigabytes_or_outlives_the_deadline(sql: str, sqlite_env: DbEnv) -> None:
    # zeroblob is allowed here so that the length limit, not the function policy, is what stops it.
    service = _raw(sqlite_env, functions=FunctionPolicy.for_dialect("sqlite", extra=["zeroblob"]))
    started = time.monotonic()
    with pytest.raises(QueryFailed) as info:
        service.query(sql, call_id="big", max_rows=1)
    assert info.value.data is not None and info.value.data["reason"] in ("resource", "data")
    assert time.monotonic() - started < 1.0
    service.engine.close()


# One VM step each, quadratic in the argument sizes (issue 11): instr/replace searched by Python's
# linear search, LIKE/GLOB patterns capped so one comparison stays within about a second.
_A = "replace(printf('%.*c', 30000000, 'z'), 'z', 'a')"
_NEEDLE = "replace(printf('%.*c', 100000, 'z'), 'z', 'a') || 'b'"
_T = "replace(printf('%.*c', 120000, 'z'), 'z', 'a')"
_SET = "replace(printf('%.*c', 120000, 'z'), 'z', 'b') || 'a'"


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (f"SELECT instr({_A}, {_NEEDLE})", [[0]]),
        (f"SELECT length(replace({_A}, {_NEEDLE}, 'x'))", [[30000000]]),
        (f"SELECT instr(CAST({_A} AS BLOB), CAST({_NEEDLE} AS BLOB))", [[0]]),
        (f"SELECT {_A} LIKE '%' || {_NEEDLE} || '%'", None),
        (f"SELECT {_A} GLOB '*' || {_NEEDLE} || '*'", None),
        # each removed character against every character of the set: 21 s in one step before
        (f"SELECT length(ltrim({_T}, {_SET}))", [[0]]),
        (f"SELECT length(rtrim({_T}, {_SET}))", [[0]]),
        (f"SELECT length(trim({_T} || 'c', {_SET}))", [[1]]),
    ],
)
def test_sqlite_string_searches_stay_within_the_deadline(
    sql: str, expected: list[list[Any]] | None, sqlite_env: DbEnv
) -> None:
    service = _raw(sqlite_env)
    started = time.monotonic()
    try:
        if expected is None:
            with pytest.raises(QueryFailed) as info:
                service.query(sql, call_id="search", max_rows=1)
            assert info.value.data is not None and info.value.data["reason"] == "resource"
        else:
            result, _ = service.query(sql, call_id="search", max_rows=1)
            assert result.rows == expected
        assert time.monotonic() - started < TIMEOUT_S + 2
    finally:
        service.engine.close()


def test_sqlite_bounded_string_functions_keep_their_meaning(sqlite_env: DbEnv) -> None:
    service = _raw(sqlite_env)
    sql = (
        "SELECT instr('héllo', 'llo'), instr('abc', ''), instr(NULL, 'a'), instr(12345, 34),"
        " instr(x'0102', x'02'), replace('aXbXc', 'X', '--'), replace('abc', '', 'z'),"
        " replace(12312, 12, 'z'), replace('a', NULL, 'b'), 'Hello' LIKE 'h%', 'Hello' GLOB 'h*'"
    )
    try:
        result, _ = service.query(sql, call_id="meaning")
        assert result.rows == [[3, 1, None, 3, 2, "a--b--c", "abc", "z3z", None, 1, 0]]
    finally:
        service.engine.close()


def test_sqlite_bounded_trims_answer_as_sqlites_own(sqlite_env: DbEnv) -> None:
    long_set = "'abcdefghijklmnopqrstuvw'"  # past the short-set path
    specials = "'\\]^-[' || 'abcdefghijklmnopq'"  # characters a regex class would read
    exprs = [
        "trim('  ab  ')", "trim('xxabyy', 'xy')", "ltrim('xxabyy', 'xy')", "rtrim('xxabyy', 'xy')",
        "trim('ééaé', 'é')", "rtrim(12300, '0')", "trim(1.5e10, '0')", "trim(x'616261', 'a')",
        "trim(NULL, 'a')", "trim('a', NULL)", "trim('abc', '')", "trim('', 'a')",
        f"trim('abcXYZcba', {long_set})", f"ltrim('abcXYZcba', {long_set})",
        f"rtrim('abcXYZcba', {long_set})", f"trim('aaaa', {long_set})",
        f"trim(']]^^--\\ab[\\--^^]]', {specials})",
        f"trim('😀a😀b😀', '😀' || {long_set})", f"rtrim('x' || char(1114111), char(1114111) || {long_set})",
    ]  # fmt: skip
    sql = "SELECT " + ", ".join(exprs)
    expected = [list(sqlite3.connect(":memory:").execute(sql).fetchone())]
    service = _raw(sqlite_env)
    try:
        result, _ = service.query(sql, call_id="trims")
        assert result.rows == expected
    finally:
        service.engine.close()


@pytest.mark.alone
@pytest.mark.serial  # times the call and reads this process's RSS: alone, not beside other workers
def test_sqlite_trim_with_every_code_point_as_its_set_is_quick_and_keeps_nothing(sqlite_env: DbEnv) -> None:
    # Red team my11 F9: a regex compiled per set took 5-6 s per row in one VM step, and `re` kept
    # ~19 MB per distinct set after the call.
    sets = (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 1114111),"
        " s AS (SELECT group_concat(char(n), '') AS s FROM r WHERE n < 55296 OR n > 57343)"
    )
    service = _raw(sqlite_env)
    try:
        before = rss_kb()
        for offsets in ("(2),(3),(4),(5),(6),(7)", "(8),(9),(10),(11),(12),(13),(14)"):
            started = time.monotonic()
            result, _ = service.query(
                f"{sets}, k(i) AS (VALUES {offsets}) SELECT i, length(ltrim('a', substr(s, i)))"
                " + length(rtrim('ba', substr(s, i))) AS n FROM s, k",
                call_id="trim-sets",
            )
            assert time.monotonic() - started < TIMEOUT_S + 1.5
            assert [row[1] for row in result.rows] == [0] * len(result.rows)
        assert rss_kb() - before < 64_000  # 13 sets held ~250 MB with the regex cache
    finally:
        service.engine.close()


def test_sqlite_printf_still_formats(sqlite_env: DbEnv) -> None:
    service = _raw(sqlite_env)
    result, _ = service.query("SELECT printf('%5.2f|%s|%*d|%%', 3.14159, 'a', 3, 7) AS f", call_id="p")
    assert result.rows == [[" 3.14|a|  7|%"]]
    service.engine.close()


def test_sqlite_authorizer_enforces_the_function_policy(sqlite_env: DbEnv) -> None:
    allow = FunctionPolicy.for_dialect("sqlite", allow=["count", "lower"])
    service = _raw(sqlite_env, functions=allow)
    result, _ = service.query(
        "SELECT count(*), lower('A') FROM sales_demo WHERE region LIKE 'E%'", call_id="ok"
    )
    assert result.rows[0][1] == "a"
    for sql in ("SELECT upper('a')", "SELECT load_extension('x')", "SELECT max(units) FROM sales_demo"):
        with pytest.raises(QueryFailed) as info:
            service.query(sql, call_id="no")
        # a function the authorizer refuses answers as permission (fixc, rtC F6), a write as read-only
        assert info.value.data is not None and info.value.data["reason"] in ("read_only", "permission"), sql
    service.engine.close()


@pytest.mark.mysql
def test_mariadb_recursion_cap_is_an_error_not_an_answer(mysql_env: DbEnv) -> None:
    service = _raw(mysql_env)
    endless = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
    with pytest.raises((QueryTimeout, QueryFailed)):
        service.query(endless, call_id="endless")
    # A legitimate recursion past MariaDB's default cap of 1000 gives the whole answer.
    deep = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5000)"
    deep += " SELECT count(*) FROM r"
    result, _ = service.query(deep, call_id="deep")
    assert result.rows == [[5000]]
    service.engine.close()


@pytest.mark.mysql
def test_mariadb_one_calls_server_memory_is_capped(mysql_env: DbEnv) -> None:
    # a derived table holds all its columns at once: twenty 16 MB values took 860 MB in mariadbd
    wide = ", ".join(f"repeat(char(65), 16000000) AS c{i}" for i in range(20))
    sums = " + ".join(f"length(c{i})" for i in range(20))
    service = SqlService(SqlEngine(mysql_env.ro_url), timeout_s=60.0)  # the cap, not the deadline
    try:
        with pytest.raises(QueryFailed) as info:
            service.query(f"SELECT {sums} AS n FROM (SELECT {wide}) AS t", call_id="mem")
        assert info.value.kind == "resource"
        within = "SELECT length(c0) AS n FROM (SELECT repeat(char(65), 16000000) AS c0) AS t"  # fits
        assert service.query(within, call_id="mem2")[0].rows == [[16000000]]
    finally:
        service.engine.close()


@pytest.mark.mysql
def test_mariadb_json_objectagg_is_left_out_its_value_escapes_the_memory_cap(mysql_env: DbEnv) -> None:
    # Red team my11 F3: JSON_OBJECTAGG stops at neither group_concat_max_len nor max_session_mem_used
    # (1,000 rows of 1 MB answered a 1 GB value, mariadbd +1 GB); JSON_ARRAYAGG stops at the first.
    rows = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 40) "
    service = SqlService(SqlEngine(mysql_env.ro_url), timeout_s=30.0)
    try:
        with pytest.raises(Refused) as left_out:
            service.query(
                rows + "SELECT LENGTH(JSON_OBJECTAGG(n, REPEAT('x', 1000000))) AS n FROM r", call_id="oa"
            )
        assert "left out" in str(left_out.value) and "--allow-function json_objectagg" in str(left_out.value)
        with pytest.raises(QueryFailed) as cut:
            service.query(
                rows + "SELECT LENGTH(JSON_ARRAYAGG(REPEAT('x', 1000000))) AS n FROM r", call_id="aa"
            )
        assert cut.value.kind == "resource"
        small = rows + "SELECT JSON_ARRAYAGG(n) AS a FROM r WHERE n < 4"
        assert service.query(small, call_id="aa2")[0].rows == [["[1,2,3]"]]
    finally:
        service.engine.close()


@pytest.mark.mysql
def test_mariadb_regexp_replace_is_left_out_it_is_quadratic_and_ignores_kill(mysql_env: DbEnv) -> None:
    # Red team my11 F10: REGEXP_REPLACE(REPEAT('a', 9000000), 'a', 'bb') answered its 5 s timeout and
    # ran on in the server (Killed, Executing) for hours: quadratic, no kill check. Small sizes here.
    sql = "SELECT LENGTH(REGEXP_REPLACE(REPEAT('a', 20000), 'a', 'bb')) AS n"
    engine = SqlEngine(mysql_env.ro_url)
    try:
        with pytest.raises(Refused) as left_out:
            SqlService(engine, timeout_s=10.0).query(sql, call_id="rr")
        assert "left out" in str(left_out.value) and "--allow-function regexp_replace" in str(left_out.value)
        allowed = FunctionPolicy.for_dialect("mysql", extra=["regexp_replace"])
        assert SqlService(engine, timeout_s=10.0, functions=allowed).query(sql, call_id="rr2")[0].rows == [
            [40000]
        ]
        # The first-match forms stay: linear in the subject.
        first = "SELECT REGEXP_INSTR(REPEAT('a', 20000), 'b') AS i, REGEXP_SUBSTR('abc', 'b+') AS s"
        assert SqlService(engine, timeout_s=10.0).query(first, call_id="ri")[0].rows == [[0, "b"]]
    finally:
        engine.close()


@pytest.mark.mysql
def test_mariadb_a_search_that_ignores_kill_still_answers_its_timeout(mysql_env: DbEnv) -> None:
    # LOCATE checks neither max_statement_time nor KILL QUERY (about 6 s here, unloaded); the
    # watchdog kills the connection instead, so the call answers at its deadline plus the grace.
    service = SqlService(SqlEngine(mysql_env.ro_url), timeout_s=1.0)
    service._admit = _passthrough
    started = time.monotonic()
    try:
        with pytest.raises(QueryTimeout):
            service.query("SELECT LOCATE(CONCAT(SPACE(5000), 'x'), SPACE(3000000)) AS p", call_id="kill")
        assert time.monotonic() - started < 4.0
        assert service.query("SELECT 1 AS one", call_id="after")[0].rows == [[1]]
    finally:
        service.engine.close()


_RUNAWAY = "SELECT LOCATE(CONCAT(SPACE(5000), 'x'), SPACE(3000000))"  # about 6 s; ignores kills
# The login's threads by command: `Query` runs a statement, `Killed` was killed and runs on; a
# login being refused shows as `Connect` for a moment (the limit is checked after authentication).
_THREADS = "SELECT COMMAND FROM information_schema.PROCESSLIST WHERE USER = %s"


@pytest.mark.mysql
@pytest.mark.alone
@pytest.mark.serial  # counts the login's server threads while killed searches run on: load moves it
def test_mariadb_runaway_calls_never_hold_more_threads_than_the_login_limit(mysql_url: str) -> None:
    # Searches that ignore every kill outlive their calls; MAX_USER_CONNECTIONS bounds how many run.
    # Pool 2 + the watchdog's KILL = a limit of 3; 6 runaway calls at once: the server never runs
    # more than 3 of the login's statements, and each call answers (timeout, or refused as busy
    # while killed statements still hold the login's connections), none waits for its search.
    budget = ConnectionBudget(pool_size=2)
    with mysql_scratch(mysql_url, "runaway") as scratch:
        with scratch.admin.cursor() as c:
            c.execute(f"ALTER USER '{scratch.reader}'@'%' WITH MAX_USER_CONNECTIONS {budget.least}")
            c.execute(f"GRANT SELECT ON {scratch.db}.* TO '{scratch.reader}'@'%'")
        engine = SqlEngine(scratch.reader_url, pool_size=budget.pool_size)
        service = SqlService(engine, timeout_s=1.0)
        service._admit = _passthrough
        samples: list[list[str]] = []
        done = threading.Event()

        def watch() -> None:
            conn = mysql_admin(mysql_url)
            with conn.cursor() as c:
                while not done.is_set():
                    c.execute(_THREADS, [scratch.reader])
                    samples.append([str(command) for (command,) in c.fetchall()])
                    time.sleep(0.05)
            conn.close()

        answers: list[tuple[str, float]] = []

        def call(i: int) -> None:
            started = time.monotonic()
            try:
                service.query(f"{_RUNAWAY} AS p{i}", call_id=f"r{i}")
                answer = "answered"
            except QueryTimeout:
                answer = "timeout"
            except QueryFailed as exc:
                answer = str((exc.data or {}).get("reason"))
            answers.append((answer, time.monotonic() - started))

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            calls = [threading.Thread(target=call, args=(i,)) for i in range(6)]
            for t in calls:
                t.start()
            for t in calls:
                t.join(60)
            time.sleep(8)  # the killed searches run on: count them until they end
        finally:
            done.set()
            watcher.join()
            engine.close()
        running = [sum(c in ("Query", "Killed") for c in s) for s in samples]
        assert max(running) <= budget.least, samples
        assert max(len(s) for s in samples) <= budget.least + 1, samples  # + one being refused
        kinds = sorted(a for a, _ in answers)
        assert len(kinds) == 6 and set(kinds) <= {"timeout", "resource"}, answers
        assert "resource" in kinds, answers
        # each call answers within two deadlines and their grace (one may queue behind another)
        assert max(s for _, s in answers) < 5.0, answers


@pytest.mark.postgres
def test_postgres_a_like_that_ignores_cancel_still_answers_its_timeout(pg_env: DbEnv) -> None:
    # LIKE with a long pattern checks for no interrupt while it matches (23 s past a 1 s
    # statement_timeout, unloaded): the watchdog cancels and shuts the socket at the deadline
    # plus the grace, so the call answers then and the server answers the next call.
    # The backend goes on matching after the socket is shut: a 1 MB subject keeps that to a few
    # seconds, and the test waits for it to end so no later test counts a stray session.
    service = SqlService(SqlEngine(pg_env.ro_url), timeout_s=1.0)
    service._admit = _passthrough
    started = time.monotonic()
    try:
        with pytest.raises(QueryTimeout):
            service.query(
                "SELECT repeat(' ', 1000000) LIKE '%' || repeat(' ', 5000) || 'x%' AS p", call_id="like"
            )
        assert time.monotonic() - started < 4.0
        assert service.query("SELECT 1 AS one", call_id="after")[0].rows == [[1]]
    finally:
        service.engine.close()
        _wait_for_session_end(pg_env, "like", deadline_s=120.0)


def _wait_for_session_end(pg_env: DbEnv, call_id: str, deadline_s: float) -> None:
    admin = make_url(pg_env.admin_url).set(drivername="postgresql").render_as_string(hide_password=False)
    end = time.monotonic() + deadline_s
    with psycopg.connect(admin, autocommit=True) as c:
        while time.monotonic() < end:
            row = c.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND application_name LIKE %s",
                [pg_env.ro_user, f"%{call_id}%"],
            ).fetchone()
            if row is None or row[0] == 0:
                return
            time.sleep(0.2)
    raise AssertionError("the runaway LIKE's backend outlived the test by two minutes")


@pytest.mark.postgres
def test_postgres_temp_file_limit_stops_a_sort_that_spills(pg_url: str) -> None:
    # What `mcpkit sql grant` sets (1GB), scaled down: the sort fails as a resource error, not the
    # host's disk (unlimited, one such sort wrote 4.6 GB in 30 s).
    with pg_scratch(pg_url, "tfl") as scratch:
        scratch.admin.execute(f"ALTER ROLE {scratch.reader} SET temp_file_limit = '1MB'")
        service = SqlService(SqlEngine(scratch.reader_url), timeout_s=30.0)
        sql = "SELECT count(*) AS n FROM (SELECT md5(g::text) AS x FROM generate_series(1, 300000) g"
        sql += " ORDER BY 1) s"
        try:
            with pytest.raises(QueryFailed) as info:
                service.query(sql, call_id="spill")
            assert info.value.kind == "resource"
            small = sql.replace("300000", "1000")
            assert service.query(small, call_id="fits")[0].rows == [[1000]]
        finally:
            service.engine.close()


@pytest.mark.postgres
def test_postgres_a_failed_cast_of_a_huge_value_logs_neither_all_of_it_nor_to_the_server(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Red team pg13 F1, pg14 F9: int4in's error quotes its whole input; one call of a 20 MB cast put
    # 20 MB into mcpkit's log and the server's. Ours is clipped; the server's is the role's
    # log_min_messages, which doctor tells and `mcpkit sql grant` sets.
    from mcpkit.sql.checks import inspect_account

    # A computed text that large is refused before it is cast (rt15pg F5); a column holding one is
    # cast as written (an expression index on the column must still match), so the error stays.
    with pg_scratch(pg_url, "elog") as scratch:
        scratch.admin.execute("CREATE TABLE huge AS SELECT repeat('x', 20000000) AS v")
        scratch.admin.execute(f"GRANT SELECT ON huge TO {scratch.reader}")
        engine = SqlEngine(scratch.reader_url)
        try:
            codes = [w.code for w in inspect_account(engine, connections=ConnectionBudget(5)).warnings]
            assert "postgres:error-log" in codes
            service = SqlService(engine, timeout_s=30.0)
            with caplog.at_level("WARNING", logger="mcpkit.sql"), pytest.raises(QueryFailed) as info:
                service.query("SELECT v::int AS n FROM huge", call_id="cast")
            assert info.value.kind == "data"
            logged = [r.getMessage() for r in caplog.records if "sql call cast failed" in r.getMessage()]
            assert logged and all(len(m) < 3000 for m in logged), [len(m) for m in logged]
            assert "characters)" in logged[0]
        finally:
            engine.close()
        scratch.admin.execute(f"ALTER ROLE {scratch.reader} SET log_min_messages = 'log'")
        engine = SqlEngine(scratch.reader_url)
        try:
            codes = [w.code for w in inspect_account(engine, connections=ConnectionBudget(5)).warnings]
            assert "postgres:error-log" not in codes
        finally:
            engine.close()


def _recursive_ctes(k: int) -> str:
    one = "t{0}(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t{0} WHERE n < 3)"
    reads = " + ".join(f"(SELECT COUNT(*) FROM t{i})" for i in range(k))
    return "WITH RECURSIVE " + ", ".join(one.format(i) for i in range(k)) + f" SELECT {reads} AS n"


@pytest.mark.mysql
def test_mariadb_many_recursive_ctes_are_refused_before_they_reach_the_server(mysql_env: DbEnv) -> None:
    # Red team my14 F4: MariaDB's memory for one WITH RECURSIVE doubles per recursive CTE; twenty
    # trivial ones OOM-killed the server (24 GB) past every session limit. Five are never sent (at
    # five, sent, it would still be harmless: this test cannot take the server down).
    service = SqlService(SqlEngine(mysql_env.ro_url), timeout_s=10.0)
    try:
        assert service.query(_recursive_ctes(4), call_id="four")[0].rows == [[12]]
        with pytest.raises(Refused) as info:
            service.query(_recursive_ctes(5), call_id="five")
        assert (info.value.data or {}).get("reason") == "too_complex"
    finally:
        service.engine.close()
