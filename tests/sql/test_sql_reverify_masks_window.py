"""With masks, a view replaced while serving never serves a masked value (red team rt30 F2).

A view the reader may read (an opted-in DEFINER view) replaced by the operator with
`... AS SELECT id, email AS tag ...` served every e-mail in clear until the next catalog
fingerprint read (the 1 s `--catalog-check-interval`); with 0, a call that read the fingerprint just
before the replace committed and ran its statement just after it still did (check-then-use). Now
every call with masks reads the fingerprint again after its statement, before its rows are returned
(`reverify.Guard.after`), and before it by default.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit.errors import ToolError
from mcpkit.sql import cli as sqlcli
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.identities import RoleEngine
from mcpkit.sql.reverify import Guard
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import MysqlScratch, PgScratch, mysql_scratch, pg_scratch

_ROWS = ", ".join(f"({i}, 'n{i}', 'secret{i}@x.io')" for i in range(1, 7))


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt30d") as db:
        db.admin.execute(
            f"""
            CREATE TABLE cust (id int PRIMARY KEY, name text, email text);
            INSERT INTO cust VALUES {_ROWS};
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT (id, name) ON cust TO {db.reader};
            CREATE VIEW pv AS SELECT id, name AS tag FROM cust;
            GRANT SELECT ON pv TO {db.reader};
            """
        )
        yield db


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "rt30d") as db:
        with db.admin.cursor() as c:
            c.execute(f"CREATE TABLE {db.db}.cust (id INT PRIMARY KEY, name VARCHAR(40), email VARCHAR(80))")
            c.execute(f"INSERT INTO {db.db}.cust VALUES {_ROWS}")
            c.execute(f"GRANT SELECT (id, name) ON {db.db}.cust TO '{db.reader}'@'%'")
            c.execute(
                f"CREATE SQL SECURITY DEFINER VIEW {db.db}.pv AS SELECT id, name AS tag FROM {db.db}.cust"
            )
            c.execute(f"GRANT SELECT ON {db.db}.pv TO '{db.reader}'@'%'")
            c.execute(f"GRANT SHOW VIEW ON {db.db}.pv TO '{db.reader}'@'%'")
        yield db


def _service(tmp_path: Path, dsn: str, view: str, *extra: str) -> SqlService:
    masks = tmp_path / "masks.yaml"
    masks.write_text("masks:\n  - cust.email\n")
    parser = argparse.ArgumentParser()
    sqlcli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["sql", "query", "--dsn", dsn, "--mask", str(masks), "--allow", f"view:{view}",
         "--allow", "unbounded-memory", *extra, "SELECT 1"]
    )  # fmt: skip
    args.allow, args.allow_function = sqlcli.opt_ins(args)
    return sqlcli._service(args, 1000)


def _ask(service: SqlService, sql: str = "SELECT * FROM pv") -> str:
    try:
        return service.query(sql, call_id="rt30d", max_rows=100)[1]
    except ToolError as exc:
        return str(exc.code)


def _loop_while_replaced(service: SqlService, replace: Callable[[], None]) -> list[str]:
    """Calls in a loop on two threads; the view replaced after 10 answers; 12 more answers after it
    (counted, not timed: a loaded host answered fewer than 20 calls in 1.8 s under parallel tests)."""
    answers: list[str] = []
    stop, more = threading.Event(), threading.Condition()

    def calls() -> None:
        while not stop.is_set():
            answer = _ask(service)
            with more:
                answers.append(answer)
                more.notify_all()

    def wait_for(n: int) -> None:
        with more:
            assert more.wait_for(lambda: len(answers) >= n, timeout=120), len(answers)

    threads = [threading.Thread(target=calls) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        wait_for(10)
        replace()
        wait_for(len(answers) + 12)
    finally:
        stop.set()
        for t in threads:
            t.join()
    return answers


def _replace_between_check_and_statement(service: SqlService, replace: Callable[[], None]) -> None:
    """The replace committed right after the call's fingerprint read, before its statement."""
    guard: Any = service.engine.guard  # type: ignore[attr-defined]
    check = guard.check

    def check_then_replace(*args: Any) -> None:
        check(*args)
        guard.check = check
        replace()

    guard.check = check_then_replace
    guard.due = lambda conn: True  # this call reads the fingerprint before its statement


def test_postgres_a_view_replaced_while_calls_run_never_serves_a_masked_value(
    pg: PgScratch, tmp_path: Path
) -> None:
    service = _service(tmp_path, pg.reader_url, "public.pv", "--catalog-check-interval", "1")
    assert "n1" in _ask(service)
    answers = _loop_while_replaced(
        service, lambda: pg.admin.execute("CREATE OR REPLACE VIEW pv AS SELECT id, email AS tag FROM cust")
    )
    assert len(answers) > 20
    assert not [a for a in answers if "@x.io" in a]
    assert answers[-1] == "SOURCE_UNVERIFIED"


def test_mariadb_a_view_replaced_while_calls_run_never_serves_a_masked_value(
    my: MysqlScratch, tmp_path: Path
) -> None:
    service = _service(tmp_path, my.reader_url, f"{my.db}.pv", "--catalog-check-interval", "1")
    assert "n1" in _ask(service)

    def replace() -> None:
        with my.admin.cursor() as c:
            c.execute(
                f"CREATE OR REPLACE SQL SECURITY DEFINER VIEW {my.db}.pv AS SELECT id, email AS tag "
                f"FROM {my.db}.cust"
            )

    answers = _loop_while_replaced(service, replace)
    assert len(answers) > 20
    assert not [a for a in answers if "@x.io" in a]
    assert answers[-1] == "SOURCE_UNVERIFIED"


def test_postgres_a_replace_between_the_check_and_the_statement_is_read_after_it(
    pg: PgScratch, tmp_path: Path
) -> None:
    service = _service(tmp_path, pg.reader_url, "public.pv")
    assert "n1" in _ask(service)
    _replace_between_check_and_statement(
        service, lambda: pg.admin.execute("CREATE OR REPLACE VIEW pv AS SELECT id, email AS tag FROM cust")
    )
    assert _ask(service) == "SOURCE_UNVERIFIED"
    assert _ask(service) == "SOURCE_UNVERIFIED"


def test_mariadb_a_replace_between_the_check_and_the_statement_is_read_after_it(
    my: MysqlScratch, tmp_path: Path
) -> None:
    service = _service(tmp_path, my.reader_url, f"{my.db}.pv")
    assert "n1" in _ask(service)

    def replace() -> None:
        with my.admin.cursor() as c:
            c.execute(
                f"CREATE OR REPLACE SQL SECURITY DEFINER VIEW {my.db}.pv AS SELECT id, email AS tag "
                f"FROM {my.db}.cust"
            )

    _replace_between_check_and_statement(service, replace)
    assert _ask(service) == "SOURCE_UNVERIFIED"


def test_postgres_a_harmless_replace_after_the_check_runs_the_call_again(
    pg: PgScratch, tmp_path: Path
) -> None:
    """The re-verification passes: the rows read while the catalog moved are discarded and the
    call runs once more, on the verified catalog."""
    service = _service(tmp_path, pg.reader_url, "public.pv")
    assert "n1" in _ask(service)
    _replace_between_check_and_statement(
        service,
        lambda: pg.admin.execute(
            "CREATE OR REPLACE VIEW pv AS SELECT id, name AS tag FROM cust WHERE id > 1"
        ),
    )
    answer = _ask(service)
    assert "n2" in answer and "n1" not in answer  # the replaced view's rows: read after it was verified


def test_postgres_calls_pin_read_committed_whatever_the_default(pg: PgScratch, tmp_path: Path) -> None:
    """The read after the statement sees what committed since the transaction began."""
    pg.admin.execute(f"ALTER ROLE {pg.reader} SET default_transaction_isolation = 'repeatable read'")
    service = _service(tmp_path, pg.reader_url, "public.pv")
    found = service.engine.execute("SELECT current_setting('transaction_isolation')", None, 1, 5.0, "iso")
    assert found.rows == (("read committed",),)


def test_postgres_shared_login_reads_the_fingerprint_after_the_call_as_before_it(pg: PgScratch) -> None:
    """Under `--allow shared-login` the call runs after `SET LOCAL ROLE`; the read after it is made
    after `RESET ROLE`, as the read before it (as the account), so an unchanged catalog matches."""
    role = f"{pg.reader}_a"
    pg.admin.execute(f"CREATE ROLE {role}")
    try:
        pg.admin.execute(f"GRANT {role} TO {pg.reader}")
        base = SqlEngine(pg.reader_url, pool_size=1)
        base.guard = Guard(lambda engine, conn: None, "base")
        base.guard.watch_masks(lambda engine, conn: None)
        engine = RoleEngine(base, role)
        engine.guard = base.guard.fresh("role", lambda engine, conn: None)
        try:
            for _ in range(3):
                found = engine.execute("SELECT current_user::text", None, 1, 5.0, "rt30d")
                assert found.rows == ((role,),)
        finally:
            engine.close()
            base.close()
    finally:
        pg.admin.execute(f"DROP OWNED BY {role}")
        pg.admin.execute(f"DROP ROLE {role}")
