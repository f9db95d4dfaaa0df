"""Masked columns on MySQL/MariaDB: the calls' account must hold SELECT on the other columns only,
and read no DEFINER view or routine over them (`mask_routes`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlglot import exp

from mcpkit.sql.profiles.base import DerivedMask, Finding
from mcpkit.sql.profiles.mysql.account import _revokes
from mcpkit.sql.profiles.mysql.linked import MERGE, linked_filter
from mcpkit.sql.profiles.mysql.roles import granted_roles, quote_name, rows_under_any_role, under_each_role
from mcpkit.sql.profiles.scan_order import hint, split_key

__all__ = ["derived_masks", "exact_ties", "readable_masked_columns", "scan_order_hints"]

_COLUMNS = (
    "SELECT column_name FROM information_schema.COLUMNS"
    " WHERE table_schema = COALESCE(:schema, DATABASE()) AND table_name = :table ORDER BY ordinal_position"
)


_NAME: Final = r"`(?:[^`]|``)+`"


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _relation(key: str) -> str:
    """A masked table's key (`table`, or `schema.table` in another database) quoted for SQL.

    >>> _relation("crm.customers"), _relation("customers")
    ('`crm`.`customers`', '`customers`')
    """
    schema, table = split_key(key)
    return f"{_quote(schema)}.{_quote(table)}" if schema else _quote(table)


def _readable(conn: Connection, table: str, column: str) -> bool:
    # A probe the server itself answers: global, database, table and column grants, roles and
    # wildcard hosts included (the information_schema privilege views list grants per level and
    # leave the combination to the reader). `WHERE 1 = 0` reads no row.
    try:
        conn.exec_driver_sql(f"SELECT {_quote(column)} FROM {_relation(table)} WHERE 1 = 0").fetchall()
    except DBAPIError:
        return False
    return True


_PROBED: Final = [("readable",)]


def _under_roles(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[tuple[str, str, list[str]]]:
    """(role, table, masked columns readable) with each role granted to the login enabled in turn:
    one `SET ROLE` away even when not a default role (`roles.under_each_role` puts the session's
    role back after)."""
    probes = [(t, c) for t, columns in sorted(masked.items()) for c in sorted(columns)]
    sql = [f"SELECT {_quote(c)} FROM {_relation(t)} WHERE 1 = 0" for t, c in probes]

    def run(statement: str) -> Sequence[tuple[Any, ...]]:
        if statement not in sql:
            result = conn.exec_driver_sql(statement)
            return [tuple(r) for r in result.all()] if result.returns_rows else []
        return _PROBED if _readable(conn, *probes[sql.index(statement)]) else []

    roles = granted_roles([str(r[0]) for r in conn.exec_driver_sql("SHOW GRANTS")])
    out = []
    for role, answers in under_each_role(run, roles, sql):
        for table in masked:
            readable = [c for (t, c), rows in zip(probes, answers, strict=True) if t == table and rows]
            if readable:
                out.append((role, table, readable))
    return out


def _qualified(database: str, key: str) -> str:
    schema, table = split_key(key)
    return f"{_quote(schema or database)}.{_quote(table)}"


def readable_masked_columns(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[Finding]:
    """One finding per table whose masked columns the current account can still select, as the
    session is and under each role granted to the login (enabled or not)."""
    user, host = str(conn.execute(text("SELECT CURRENT_USER()")).scalar()).rsplit("@", 1)
    database = str(conn.execute(text("SELECT DATABASE()")).scalar())
    account = f"'{user}'@'{host}'"
    findings = []
    lines = [str(r[0]) for r in conn.exec_driver_sql("SHOW GRANTS")]  # PUBLIC's lines too (MariaDB 10.11)
    for role, table, readable in _under_roles(conn, masked):
        name, quoted = _qualified(database, table), quote_name(role)
        findings.append(
            Finding(
                "masked-column-readable",
                f"can read masked column(s) {', '.join(readable)} of {name} through role {quoted}"
                " (granted to the login: one SET ROLE away, default role or not)",
                f"REVOKE {quoted} FROM {account}; or REVOKE SELECT ON {name} FROM {quoted} and grant"
                " the role the other columns only",
            )
        )
    for table, columns in sorted(masked.items()):
        readable = [c for c in sorted(columns) if _readable(conn, table, c)]
        if not readable:
            continue
        folded = {c.casefold() for c in columns}
        schema, bare = split_key(table)
        others = [str(r[0]) for r in conn.execute(text(_COLUMNS), {"schema": schema, "table": bare})]
        others = [_quote(c) for c in others if c.casefold() not in folded]
        name = _qualified(database, table)
        grant = f"; GRANT SELECT ({', '.join(others)}) ON {name} TO {account}" if others else ""
        # a grant to PUBLIC is revoked from PUBLIC: the login's REVOKE alone left it (red team rtB F5)
        public = "".join(f"{r}; " for r in _revokes(lines, "SELECT", name) if r.endswith(" FROM PUBLIC"))
        findings.append(
            Finding(
                "masked-column-readable",
                f"can read masked column(s) {', '.join(readable)} of {name}",
                f"{public}REVOKE SELECT ON {name} FROM {account}{grant} (a SELECT on {_quote(database)}.* or"
                " *.* must be replaced by grants per table: SHOW GRANTS)",
            )
        )
    return findings


# Every column of the table this account can see, with the expression of a generated one, or of
# a DEFAULT that reads other columns of the row (MariaDB 10.2+ stores what it computes at INSERT as
# a generated column would: red team mask17 F4, `login DEFAULT (LOWER(email))` answered e-mails).
# MariaDB keeps each column an expression reads backquoted (lcase(`email`)) and a literal default
# quoted ('abc'), so an unquoted default with a backquoted name reads a column.
_GENERATED = (
    "SELECT column_name, COALESCE(generation_expression,"
    " CASE WHEN column_default NOT LIKE '''%' AND column_default LIKE '%`%' THEN column_default END)"
    " FROM information_schema.COLUMNS"
    " WHERE table_schema = COALESCE(:schema, DATABASE()) AND table_name = :table"
)


def _split(key: str) -> tuple[str | None, str]:
    """`(schema, table)` of a masked table's key (`table`, `schema.table` or `` `schema`.`table` ``)."""
    if not key.startswith("`"):
        return split_key(key)
    parts = [p[1:-1].replace("``", "`") for p in re.findall(_NAME, key)]
    return (parts[0], parts[1]) if len(parts) == 2 else (None, key)


def _generated_rows(
    conn: Connection, masked: Mapping[str, frozenset[str]]
) -> dict[str, list[tuple[str, str | None]]]:
    """`_GENERATED`'s rows of each masked table as the session is and under each role granted to
    the login: information_schema lists a column only to an account (or enabled role) holding a
    privilege on it, and a role's grant is one `SET ROLE` away (red team rt27 F6)."""
    keys = sorted(masked)
    sql = [f"/* generated {i} */ SELECT 1" for i in range(len(keys))]

    def listing(key: str) -> list[tuple[str, str | None]]:
        schema, table = _split(key)
        rows = conn.execute(text(_GENERATED), {"schema": schema, "table": table}).all()
        return [(str(n), None if e is None else str(e)) for n, e in rows]

    def run(statement: str) -> Sequence[tuple[Any, ...]]:
        if statement in sql:
            return listing(keys[sql.index(statement)])
        result = conn.exec_driver_sql(statement)
        return [tuple(r) for r in result.all()] if result.returns_rows else []

    out = {key: listing(key) for key in keys}
    roles = granted_roles([str(r[0]) for r in conn.exec_driver_sql("SHOW GRANTS")])
    for _, answers in under_each_role(run, roles, sql):
        for key, rows in zip(keys, answers, strict=True):
            out[key] += [(str(n), None if e is None else str(e)) for n, e in rows]
    return out


def derived_masks(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[DerivedMask]:
    """Generated columns, and columns whose DEFAULT reads the row, computed (directly or through
    other such columns) from a masked one.

    A generated column whose expression reads a column this account cannot see (information_schema
    lists only the columns it holds a privilege on) counts too: what it reads cannot be checked.
    One the account cannot see at all is not listed: a DEFINER view reading it is refused by
    `mask_routes` instead (its query does not prepare as the account).
    """
    out = []
    listed = _generated_rows(conn, masked)
    for key, columns in sorted(masked.items()):
        schema, table = _split(key)
        rows = listed[key]
        visible = {str(name).casefold() for name, _ in rows}
        generated = {str(name): str(expr).casefold() for name, expr in rows if expr is not None}
        tainted = {c.casefold() for c in columns}
        found: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, expr in generated.items():
                if name in found:
                    continue
                reads = {m[1:-1].replace("``", "`") for m in re.findall(_NAME, expr)}
                if reads & tainted or reads - visible:
                    found.add(name)
                    tainted.add(name.casefold())
                    changed = True
        if found:
            out.append(DerivedMask(key, schema, table, frozenset(found), "generated from a masked column"))
    return out + _merge_masks(conn, masked, out)


# Tables whose rows live in other tables or servers (`linked.LINKED_ENGINES`) of every database the
# account sees (red team mask17 F7: a MERGE table in another database answered the masked column).
# MariaDB checks only the linked table's own privileges. A MERGE table maps its columns to each
# table of its UNION list by position; the others (FEDERATED, CONNECT, SPIDER, ...) by name or by
# position, to a table named in a CONNECTION, a CREATE SERVER or a table option this account may not
# read, on this server or another one: every column of theirs counts as masked.
# One row per column the account sees (NULL: none), as the session is and under each role granted
# to the login: a MERGE table granted to a role that is not enabled is one `SET ROLE` away.
_MERGES = (
    "SELECT l.table_schema, l.table_name, l.table_schema = DATABASE(), UPPER(l.engine), c.column_name,"
    " c.ordinal_position FROM (SELECT table_schema, table_name, engine FROM information_schema.TABLES"
    f" WHERE {linked_filter()}) l LEFT JOIN information_schema.COLUMNS c"
    " ON c.table_schema = l.table_schema AND c.table_name = l.table_name"
)
_POSITIONS = (
    "SELECT column_name, ordinal_position FROM information_schema.COLUMNS"
    " WHERE table_schema = COALESCE(:schema, DATABASE()) AND table_name = :table"
)
_UNION: Final = re.compile(r"\bUNION=\(([^)]*)\)\s*$")


def _union(conn: Connection, merge: str, database: str) -> list[tuple[str, str]] | None:
    """`(schema, table)` pairs of the UNION list of MERGE table `merge` of `database` (which its
    unqualified names mean), case-folded (None: its definition is hidden from the account)."""
    try:
        create = str(conn.exec_driver_sql(f"SHOW CREATE TABLE {_quote(database)}.{_quote(merge)}").one()[1])
    except DBAPIError:
        return None
    m = _UNION.search(create)
    if m is None:
        return []
    out = []
    for chain in re.findall(rf"{_NAME}(?:\.{_NAME})?", m[1]):
        parts = [p[1:-1].replace("``", "`").casefold() for p in re.findall(_NAME, chain)]
        out.append((parts[0], parts[1]) if len(parts) == 2 else (database.casefold(), parts[0]))
    return out


def _linked_tables(conn: Connection) -> dict[tuple[str, str, bool, str], dict[int, str]]:
    """Each linked table the account sees, as the session is or under a role granted to the login
    (`roles.under_each_role`): `(schema, table, in the default database, ENGINE)` -> its columns
    by position."""

    def run(statement: str) -> Sequence[tuple[Any, ...]]:
        result = conn.exec_driver_sql(statement)
        return [tuple(r) for r in result.all()] if result.returns_rows else []

    rows = rows_under_any_role(run, _MERGES)
    out: dict[tuple[str, str, bool, str], dict[int, str]] = {}
    for home, table, default, engine, column, position in rows:
        own = out.setdefault((str(home), str(table), bool(default), str(engine)), {})
        if column is not None:
            own[int(position)] = str(column)
    return dict(sorted(out.items()))


def _merge_masks(
    conn: Connection, masked: Mapping[str, frozenset[str]], generated: list[DerivedMask]
) -> list[DerivedMask]:
    """The columns of MERGE tables at the positions of masked columns of a table in their UNION
    list: the same values under another name; every column (that the account sees) of a table of the
    other linked engines. A position whose column in that table this account cannot see counts too
    (it cannot be checked); where the UNION list is hidden from the account (SHOW CREATE TABLE needs
    more than column grants), every masked table counts as in it."""
    database = str(conn.execute(text("SELECT DATABASE()")).scalar())
    hidden: dict[tuple[str, str], set[str]] = {}
    for key, columns in [*masked.items(), *((d.key, d.columns) for d in generated)]:
        schema, table = _split(key) if key.startswith("`") else (None, key)
        if schema is None and "." in table:
            schema, _, table = table.partition(".")
        spot = ((schema or database).casefold(), table.casefold())
        hidden.setdefault(spot, set()).update(c.casefold() for c in columns)
    out = []
    for (home, merge, default, engine), own in _linked_tables(conn).items():
        key = str(merge) if default else f"{home}.{merge}"
        if engine != MERGE:  # linked by name or position to a table this check cannot read: all of it
            if not own:  # no column of it is readable to this account
                continue
            why = f"a {engine} table: its rows are another table's or server's, which this check cannot see"
            out.append(
                DerivedMask(key, None if default else str(home), str(merge), frozenset(own.values()), why)
            )
            continue
        sources = _union(conn, str(merge), str(home))
        found: set[str] = set()
        # hidden (column grants only): any masked table may be in it, so each one's positions count
        for schema, table in list(hidden) if sources is None else sources:
            if (schema, table) not in hidden or (schema, table) == (home.casefold(), merge.casefold()):
                continue  # not masked, or itself (derived by an earlier round: not in its own list)
            rows = conn.execute(text(_POSITIONS), {"schema": schema, "table": table}).all()
            seen = {int(p): str(n).casefold() for n, p in rows}
            found |= {n for p, n in own.items() if p not in seen or seen[p] in hidden[(schema, table)]}
        if found:
            why = "a MERGE table over a masked table (columns by position)"
            if sources is None:
                why = "a MERGE table whose UNION list this account cannot read, at a masked position"
            schema = None if default else str(home)
            out.append(DerivedMask(key, schema, str(merge), frozenset(found), why))
    return out


_INDEXED = """
SELECT INDEX_NAME, COLUMN_NAME, SEQ_IN_INDEX FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = coalesce(:schema, DATABASE()) AND TABLE_NAME = :table
"""


def scan_order_hints(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
    """Indexes over a masked column, from information_schema; InnoDB stores rows in PRIMARY KEY
    order. A reader with column grants sees an index's rows only for the columns it may read, so
    an index with a gap in its sequence holds a column the reader cannot see (likely masked)."""
    out: list[str] = []
    for key, columns in sorted(masked.items()):
        schema, table = split_key(key)
        wanted = {c.casefold() for c in columns}
        seen: dict[str, list[int]] = {}
        for index, column, seq in conn.execute(text(_INDEXED), {"schema": schema, "table": table}).all():
            seen.setdefault(str(index), []).append(int(seq))
            if str(column).casefold() in wanted:
                why = (
                    "primary key: InnoDB stores rows in its order" if index == "PRIMARY" else f"index {index}"
                )
                out.append(hint(key, str(column), why))
        for index, seqs in sorted(seen.items()):
            if sorted(seqs) != list(range(1, len(seqs) + 1)):
                out.append(hint(key, "(a column this account cannot read)", f"index {index}"))
    return out


_DECLARED: Final = "mcpkit_type"  # `masking.ties.TYPE`: a base table column's declared type
_DOUBLE: Final = re.compile(r"\s*(float|double|real)", re.IGNORECASE)


def exact_ties(node: exp.Expr) -> list[exp.Expr]:
    """The binary form: MariaDB's default collations ignore case and trailing spaces. A computed
    number may be a double, whose -0 = 0 print alike and ATAN2(x, -1) tells apart (red team rtB F4:
    the first-scanned of them kept by a GROUP BY): its sign follows, for numbers only (COERCIBILITY
    5; IF reads ATAN2 only then, so text raises no conversion warning)."""
    binary = exp.Cast(this=node.copy(), to=exp.DataType.build("binary", dialect="mysql"))
    declared = node.meta.get(_DECLARED) if isinstance(node, exp.Column) else None
    if declared and not _DOUBLE.match(declared):
        return [binary]
    numeric = exp.EQ(
        this=exp.Anonymous(this="COERCIBILITY", expressions=[node.copy()]), expression=exp.Literal.number(5)
    )
    sign = exp.If(
        this=numeric,
        true=exp.Anonymous(this="ATAN2", expressions=[node.copy(), exp.Literal.number(-1)]),
        false=exp.Null(),
    )
    return [binary, sign]
