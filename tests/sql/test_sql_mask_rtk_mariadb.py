"""Red team rtK on MariaDB masking (fix session fixn).

F1: `ALTER TABLE t ENGINE=Aria, ORDER BY email` while serving kept every column and index row the
account sees, so the catalog fingerprint did not move and calls went on with the InnoDB-era pins:
Aria's heap, stored in e-mail order, was scanned whole (no hint stops a table scan) and the time a
per-row failure took ranked the e-mails. The fingerprint now reads each table's engine (and whether
it has a secondary index): the next call re-verifies and is refused, as start-up refuses such a table.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.errors import ToolError
from mcpkit.sql import cli as sqlcli
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import MysqlScratch, masks_file, mysql_scratch

pytestmark = pytest.mark.mysql


@pytest.fixture
def served(mysql_url: str, tmp_path: Path) -> Iterator[tuple[MysqlScratch, SqlService]]:
    with mysql_scratch(mysql_url, "fixn_k1") as db:
        with db.admin.cursor() as c:
            c.execute(
                f"CREATE TABLE {db.db}.eng (id int NOT NULL PRIMARY KEY, name varchar(20) NOT NULL,"
                " email varchar(60) NOT NULL, KEY eng_name (name)) ENGINE=InnoDB"
            )
            c.execute(f"INSERT INTO {db.db}.eng VALUES (1, 'a', 'z@x'), (2, 'b', 'a@x'), (3, 'c', 'm@x')")
            c.execute(f"GRANT SELECT (id, name) ON {db.db}.eng TO '{db.reader}'@'%'")
        parser = argparse.ArgumentParser()
        sqlcli.register(parser.add_subparsers(dest="command"))
        args = parser.parse_args(
            ["sql", "query", "--dsn", db.reader_url, "--mask", masks_file(tmp_path, "eng.email"),
             "--allow", "unbounded-memory", "--catalog-check-interval", "0", "SELECT 1"]
        )  # fmt: skip
        args.allow, args.allow_function = sqlcli.opt_ins(args)
        service = sqlcli._service(args, 1000)
        try:
            yield db, service
        finally:
            service.engine.close()


def _ask(service: SqlService, sql: str) -> object:
    try:
        return service.query(sql, call_id="fixn")[0].rows
    except ToolError as exc:
        return str(exc.code)


def test_f1_an_engine_changed_while_serving_is_verified_again(
    served: tuple[MysqlScratch, SqlService],
) -> None:
    db, service = served
    sql = "SELECT COUNT(*) AS n FROM eng"
    assert _ask(service, sql) == [[3]]
    with db.admin.cursor() as c:
        c.execute(f"ALTER TABLE {db.db}.eng ENGINE=Aria, ORDER BY email")
    assert _ask(service, sql) == "SOURCE_UNVERIFIED"  # before: [[3]], scanned in e-mail order
    with db.admin.cursor() as c:
        c.execute(f"ALTER TABLE {db.db}.eng ENGINE=InnoDB")
    assert _ask(service, sql) == [[3]]  # undone: served again


def test_f2_an_index_ignored_while_serving_is_unpinned(served: tuple[MysqlScratch, SqlService]) -> None:
    """The pin named `eng_name`, which an IGNORED index fails (1176) in a hint: every call on the
    table failed until `--reverify-interval`. Now the next call re-reads the pins."""
    db, service = served
    sql = "SELECT id FROM eng WHERE name = 'b'"
    assert _ask(service, sql) == [[2]]
    with db.admin.cursor() as c:
        c.execute(f"ALTER TABLE {db.db}.eng ALTER INDEX eng_name IGNORED")
    assert _ask(service, sql) == [[2]]  # before: the query failed
    with db.admin.cursor() as c:
        c.execute(f"ALTER TABLE {db.db}.eng ALTER INDEX eng_name NOT IGNORED")
    assert _ask(service, sql) == [[2]]
