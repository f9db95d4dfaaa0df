"""Tables whose rows live in other tables or servers (`linked.LINKED_ENGINES`) in MariaDB's catalog
fingerprint and mask checks.

The fingerprint listed MERGE tables in a query of its own, one round trip more on every read (two
with `--mask`, before and after each call); the list now comes in the fingerprint's main query, and
SHOW CREATE TABLE runs only for a table of those engines. FEDERATED, CONNECT, SPIDER and the other
engines of the table are not installed here (no INSTALL PLUGIN on the shared server): they are
checked through the SQL the fingerprint and the mask checks run, MERGE live.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from mcpkit.sql.profiles.mysql import fingerprint, linked, masks
from mcpkit.sql.profiles.mysql.fingerprint import mysql_fingerprint
from tests.sql.sql_support import MysqlScratch, mysql_scratch

pytestmark = pytest.mark.mysql


class _Counted:
    """The real reader connection, recording each statement its cursors run."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.sql = conn, []

    def cursor(self) -> Any:
        cur = self.conn.cursor()
        real = cur.execute

        def execute(sql: str, *args: Any) -> Any:
            self.sql.append(sql)
            return real(sql, *args)

        cur.execute = execute
        return cur


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "fpfold_lk") as db:
        with db.admin.cursor() as c:
            for t in ("cmy", "twin"):
                c.execute(f"CREATE TABLE {db.db}.{t} (id INT, email VARCHAR(80)) ENGINE=MyISAM")
            c.execute(f"GRANT SELECT (id) ON {db.db}.cmy TO '{db.reader}'@'%'")
        yield db


@pytest.fixture
def reader(my: MysqlScratch) -> Iterator[_Counted]:
    conn = pymysql.connect(host="127.0.0.1", user=my.reader, password="pw", database=my.db, autocommit=True)
    try:
        yield _Counted(conn)
    finally:
        conn.close()


def _merge(my: MysqlScratch) -> None:
    with my.admin.cursor() as c:
        c.execute(f"CREATE TABLE {my.db}.m (id INT, email VARCHAR(80)) ENGINE=MERGE UNION=({my.db}.twin)")
        c.execute(f"GRANT SELECT ON {my.db}.m TO '{my.reader}'@'%'")


def _repoint(my: MysqlScratch) -> None:
    with my.admin.cursor() as c:
        c.execute(f"ALTER TABLE {my.db}.m UNION=({my.db}.cmy)")


def test_without_a_linked_table_the_fingerprint_is_two_statements(reader: _Counted) -> None:
    """Before: a third statement listed the MERGE tables on every read."""
    mysql_fingerprint(reader)
    assert [s.split()[0:2] for s in reader.sql] == [["SHOW", "GRANTS"], ["SELECT", "CONCAT_WS('/',"]]


def test_a_merge_table_costs_its_show_create_and_a_new_union_moves_it(
    my: MysqlScratch, reader: _Counted
) -> None:
    _merge(my)
    first = mysql_fingerprint(reader)
    assert len(reader.sql) == 3 and reader.sql[2].startswith("SHOW CREATE TABLE")
    assert mysql_fingerprint(reader) == first
    _repoint(my)
    assert mysql_fingerprint(reader) != first


def test_a_list_cut_at_group_concat_max_len_is_read_again(my: MysqlScratch, reader: _Counted) -> None:
    """The names are a JSON aggregate, cut at the session's group_concat_max_len (here 4 bytes):
    the count disagrees, and the list is read by a query of its own, the definitions with it."""
    _merge(my)
    with reader.conn.cursor() as c:
        c.execute("SET SESSION group_concat_max_len = 4")
    first = mysql_fingerprint(reader)
    assert fingerprint.LINKED_TABLES in reader.sql
    assert any(s.startswith("SHOW CREATE TABLE") for s in reader.sql)
    assert mysql_fingerprint(reader) == first
    _repoint(my)
    assert mysql_fingerprint(reader) != first


def test_one_table_of_engines_serves_the_fingerprint_and_the_mask_checks() -> None:
    """FEDERATED/FEDERATEDX (CONNECTION=), CONNECT (TABNAME=), SPIDER (COMMENT='server ...') and
    MERGE (UNION=) can each be re-pointed while serving; the fingerprint lists and the mask checks
    read the tables of every engine of the one table (not installed here: checked through the SQL)."""
    for engine in ("MRG_MYISAM", "FEDERATED", "FEDERATEDX", "CONNECT", "SPIDER"):
        assert engine in linked.LINKED_ENGINES
        assert f"'{engine}'" in linked.linked_filter()
    assert linked.linked_filter() in fingerprint._LINKED
    assert fingerprint._LINKED in fingerprint._SEEN
    assert linked.linked_filter() in masks._MERGES
    assert all(e == e.upper() for e in linked.LINKED_ENGINES)  # compared with UPPER(engine)
