"""MariaDB: one call's internal temporary tables share one on-disk budget.

MariaDB 10.11 caps each internal temporary table (`tmp_disk_table_size`), not a statement's total
(`max_tmp_session_space_usage` arrived in 11.5), and on-disk (Aria) temporary tables are outside
`max_session_mem_used`. A query with many GROUP BY, DISTINCT or derived tables built about 2.5 GB
of them in one call at 256 MiB each (red team my14 F3). So each query is EXPLAINed first, in the
call's own session, and runs with `tmp_disk_table_size` = the call's budget / the temporary tables
its plan can build (`temp_tables`): every block the plan holds is listed, a view's blocks
included, so the count holds whatever the text hides. When the server refuses the EXPLAIN (1345:
a view over tables the login cannot read, allowed by name), the text's blocks are counted instead,
with an allowance for the view's.

MySQL 8 has no such cap to set: TempTable's `temptable_max_ram` and `temptable_max_mmap` are one
pool for every session (global only), `tmp_table_size` only moves an in-memory table to disk, and
the on-disk InnoDB temporary tables (session temporary tablespaces, 8.0.16+) have no size limit.
So on MySQL the bound is not claimed: `temp_space_findings` refuses it at start-up, unless the
operator accepts it (`--allow temp-space`).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from typing import Any, Final

from sqlglot import exp, parse_one
from sqlglot.errors import SqlglotError

from mcpkit.sql.profiles.findings import Finding

__all__ = [
    "CALL_TMP_DISK_BYTES",
    "DEFAULT_TMP_DISK_BYTES",
    "per_table_bytes",
    "planned_tables",
    "sized",
    "temp_space_findings",
    "temp_tables",
]

CALL_TMP_DISK_BYTES: Final = 1024 * 1024 * 1024
"""What one call's internal temporary tables may hold on disk, all together (MariaDB), as
PostgreSQL's `temp_file_limit` that `mcpkit sql grant` sets: the widest answer allowed (500 rows
of a hundred 600-character cells, materialized once under the clipping) needs about 130 MB in one
table beside three small ones."""
DEFAULT_TMP_DISK_BYTES: Final = CALL_TMP_DISK_BYTES // 16
"""Each table's cap when the plan could not be read (and for statements not EXPLAINed)."""
_FLOOR: Final = 1024  # the server's minimum: a smaller value is raised with a warning (1292)
_QUERY: Final = re.compile(r"\s*(\(|SELECT\b|WITH\b|VALUES\b)", re.IGNORECASE)
_BLOCKS: Final = re.compile(r"\b(SELECT|GROUP\s+BY|DISTINCT|UNION|INTERSECT|EXCEPT)\b", re.IGNORECASE)
_VIEW_BLOCKS: Final = 16
# Tables no EXPLAIN row shows (red team my17 F3: six COUNT(DISTINCT) over text held 1.42 GB at 1 GiB
# each): an aggregate's DISTINCT de-duplicates in its own temporary table, and each reference to
# a recursive CTE builds one more beside its step table (red team my18 F4: 3 + K for K references).
_UNSHOWN: Final = re.compile(r"\(\s*DISTINCT\b", re.IGNORECASE)
_RECURSIVE: Final = re.compile(r"\bRECURSIVE\b", re.IGNORECASE)
# Blocks that materialize their result (a derived table per reference, a semi-join or IN
# materialization, a set operation's result, a recursive CTE's step table).
_RESULT_BLOCKS: Final = frozenset(
    {"DERIVED", "LATERAL DERIVED", "MATERIALIZED", "UNION RESULT", "UNIT RESULT", "INTERSECT RESULT",
     "EXCEPT RESULT", "RECURSIVE UNION"}
)  # fmt: skip
# Extra notes of a row that builds a table: a weedout, JSON_TABLE, an information_schema scan.
_TABLE_NOTES: Final = ("Start temporary", "Table function", "Scanned", "Open_", "Skip_open_table")


def temp_tables(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> int:
    """The internal temporary tables a MariaDB `EXPLAIN` (tabular) plan can build, at least one.

    "Using temporary" counts two: one block may group into one table and then sort or DISTINCT
    into a second.

    >>> cols = ["id", "select_type", "table", "Extra"]
    >>> temp_tables(cols, [(1, "PRIMARY", "<derived2>", ""), (2, "DERIVED", "t", "Using temporary")])
    3
    """
    names = [c.lower() for c in columns]
    kind, extra = names.index("select_type"), names.index("extra")
    count = 0
    for row in rows:
        note = str(row[extra] or "")
        count += 2 * ("Using temporary" in note)
        count += str(row[kind] or "").upper() in _RESULT_BLOCKS
        count += any(n in note for n in _TABLE_NOTES)
    return max(count, 1)


def _written_tables(sql: str, tree: exp.Expr | None) -> int:
    """The temporary tables a plan the server would not show may build, from the text: two per
    SELECT, GROUP BY, DISTINCT or set operation, and a view's own blocks (16) for each relation
    the text names, since each reference to a view that cannot be merged is materialized again
    (red team rt16 F5: 30 derived tables beside a view held 1.38 GB at 64 MiB each; my17 F6: one
    view named 40 times held 1.95 GB)."""
    return 2 * len(_BLOCKS.findall(sql)) + _VIEW_BLOCKS * max(_relations(sql, tree), 1)


def _parsed(sql: str, tree: exp.Expr | None) -> exp.Expr | None:
    """`tree` (admission's parse of the query `sql` sends), or `sql` parsed here; None when it
    does not parse."""
    if tree is not None:
        return tree
    try:
        return parse_one(sql, read="mysql")
    except SqlglotError:
        return None


def _relations(sql: str, tree: exp.Expr | None) -> int:
    """How many relations `sql` names (each a possible view), at least one per FROM or JOIN."""
    parsed = _parsed(sql, tree)
    if parsed is None:
        return len(re.findall(r"\b(?:FROM|JOIN)\b|,", sql, re.IGNORECASE))
    return sum(1 for _ in parsed.find_all(exp.Table))


def _recursive_references(sql: str, tree: exp.Expr | None) -> int:
    """A table for each place the text reads a recursive CTE, outside its own step (at least one
    each): its step table is in the plan, each further reader builds its own."""
    if tree is None and not _RECURSIVE.search(sql):
        return 0
    parsed = _parsed(sql, tree)
    if parsed is None:
        return 1 + len(_RECURSIVE.findall(sql))
    count = 0
    for with_ in parsed.find_all(exp.With):
        for cte in with_.expressions if with_.args.get("recursive") else ():
            name = cte.alias_or_name.casefold()
            own = {id(t) for t in cte.find_all(exp.Table) if t.name.casefold() == name}
            if own:  # it reads itself: recursive
                readers = sum(1 for t in parsed.find_all(exp.Table) if t.name.casefold() == name)
                count += max(1, readers - len(own))
    return count


def planned_tables(cursor: Any, sql: str, tag: str = "", tree: exp.Expr | None = None) -> int:
    """The internal temporary tables `sql` may build: its `EXPLAIN` plan's, read on `cursor`, and
    those no plan row shows (an aggregate's DISTINCT, a recursive CTE's second table); counted from
    the text when the server will not show the plan (1345). `tree`: admission's parse of the query
    `sql` sends (clipped or not: the same relations and CTEs), so the text is not parsed again."""
    pymysql: Any = importlib.import_module("pymysql")
    unshown = len(_UNSHOWN.findall(sql)) + _recursive_references(sql, tree)
    try:
        cursor.execute(f"{tag}EXPLAIN {sql}")
    except pymysql.err.MySQLError as exc:
        if getattr(exc, "args", (None,))[0] != 1345:  # a view over tables the login cannot read
            raise
        return _written_tables(sql, tree) + unshown
    columns = [d[0] for d in cursor.description or ()]
    return temp_tables(columns, cursor.fetchall()) + unshown


def per_table_bytes(tables: int) -> int:
    """`tmp_disk_table_size` for a plan of `tables` temporary tables: the call's share each.

    >>> per_table_bytes(4) == CALL_TMP_DISK_BYTES // 4
    True
    """
    share = CALL_TMP_DISK_BYTES // max(tables, 1)
    return max(_FLOOR, share - share % _FLOOR)


def sized(cursor: Any, sql: str, tag: str = "", tree: exp.Expr | None = None) -> str:
    """`sql` under a `tmp_disk_table_size` that shares the call's budget among the temporary
    tables it may build (`planned_tables`, MariaDB); `sql` as it is when it is no query (SELECT,
    WITH, VALUES, a parenthesis)."""
    if _QUERY.match(sql) is None:
        return sql
    size = per_table_bytes(planned_tables(cursor, sql, tag, tree))
    return f"SET STATEMENT tmp_disk_table_size = {size} FOR {sql}"


def temp_space_findings(version: str, current: str) -> list[Finding]:
    """None on MariaDB (each call runs under `sized`); on MySQL (`VERSION()` without "MariaDB"),
    one finding: a call's temporary tables are not bounded there.

    >>> temp_space_findings("10.11.19-MariaDB-0+deb12u1", "r@%")
    []
    >>> [f.opt_in for f in temp_space_findings("8.0.36", "r@%")]
    ['temp-space']
    """
    if "mariadb" in version.lower():
        return []
    message = (
        f"{current} is served by MySQL {version}, which has no per-statement cap on internal temporary"
        " tables (MariaDB's tmp_disk_table_size): TempTable's temptable_max_ram and temptable_max_mmap"
        " are one pool for all sessions and on-disk InnoDB temporary tables have no size limit, so"
        " one call's GROUP BY, DISTINCT or derived tables can fill the server's disk"
    )
    fix = (
        "no statement removes it; bound the server as a whole (SET PERSIST temptable_max_ram,"
        " temptable_max_mmap; a quota on innodb_temp_tablespaces_dir) and accept it"
    )
    return [Finding("mysql:temp-space", message, fix, "temp-space")]
