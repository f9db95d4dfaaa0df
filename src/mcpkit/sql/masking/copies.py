"""Columns that hold copies of masked values by a foreign key: `orders.customer_email REFERENCES
customers(email)` stores the e-mail itself, so it is masked like the column it references."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, NoSuchTableError

from mcpkit.sql.profiles.base import DerivedMask

__all__ = ["copied_masks", "derived_and_copied", "referenced_hints"]

# MariaDB refuses SHOW CREATE TABLE (SQLAlchemy's reflection of keys) to an account that holds
# only column privileges; the catalog lists the keys of the tables it may read.
_MYSQL_KEYS = (
    "SELECT column_name, NULLIF(referenced_table_schema, DATABASE()), referenced_table_name,"
    " referenced_column_name FROM information_schema.KEY_COLUMN_USAGE"
    " WHERE table_schema = COALESCE(:s, DATABASE()) AND table_name = :t"
    " AND referenced_column_name IS NOT NULL"
)
# The database's own catalogs (PostgreSQL, MySQL/MariaDB): no copy of a user's table lives there.
_SYSTEM = frozenset({"information_schema", "pg_catalog", "mysql", "performance_schema", "sys"})

Key = tuple[str, str | None, str, str]  # column, referenced schema (None: default), table, column


def _keys(conn: Connection, schema: str | None, table: str) -> list[Key]:
    try:
        found = inspect(conn).get_foreign_keys(table, schema)
    except NoSuchTableError:  # dropped since it was listed (another session's): it references nothing
        return []
    except DBAPIError:
        if conn.dialect.name not in ("mysql", "mariadb"):
            raise
        rows = conn.execute(text(_MYSQL_KEYS), {"s": schema, "t": table})
        return [(str(c), None if s is None else str(s), str(t), str(r)) for c, s, t, r in rows]
    return [
        (c, fk.get("referred_schema") or None, fk["referred_table"], r)
        for fk in found
        for c, r in zip(fk["constrained_columns"], fk["referred_columns"], strict=False)
    ]


def _name(schema: str | None, table: str) -> str:
    return (f"{schema}.{table}" if schema else table).casefold()


def _all_keys(
    conn: Connection, schemas: Iterable[str]
) -> tuple[str | None, dict[tuple[str | None, str], list[Key]]]:
    """The default schema, and the foreign keys of every table the connection lists (None: the
    default schema's) and of `schemas`' tables."""
    insp = inspect(conn)
    default = insp.default_schema_name
    listed = [s for s in insp.get_schema_names() if s.casefold() not in _SYSTEM and not s.startswith("pg_")]
    others = [s for s in dict.fromkeys([*schemas, *listed]) if s and s != default]
    # the default schema's own tables (PostgreSQL's unqualified listing is every table on the path)
    tables: list[tuple[str | None, str]] = (
        [(None, t) for t in insp.get_table_names(default)] if default else []
    )
    tables += [(s, t) for s in others for t in insp.get_table_names(s)]
    return default, {(s, t): _keys(conn, s, t) for s, t in tables}


def referenced_hints(
    conn: Connection, masked: Mapping[str, frozenset[str]], schemas: Iterable[str] = ()
) -> list[str]:
    """A warning per masked column that references an unmasked one by a foreign key: every masked
    value is one of the referenced column's values (`users.email REFERENCES email_dir(addr)`; red
    team rt19mask F6). Warned, not refused: the referenced column tells which values exist, not
    which row holds which; whether they are as secret is the operator's call. `masked` as for
    `copied_masks`."""
    default, keys = _all_keys(conn, schemas)
    folded = {k.casefold(): {c.casefold() for c in cols} for k, cols in masked.items()}
    out = []
    for (schema, table), refs in sorted(keys.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        mine = folded.get(_name(schema, table), set())
        for column, target_schema, target, referenced in refs:
            target_schema = None if target_schema == default else target_schema
            there = _name(target_schema, target)
            if column.casefold() in mine and referenced.casefold() not in folded.get(there, set()):
                out.append(
                    f"masked column {_name(schema, table)}.{column} references {there}.{referenced} by a "
                    f"foreign key: every masked value is also a value of {there}.{referenced}, which is "
                    "not masked; mask it too if its values are as secret (see docs/masking.md)"
                )
    return out


def copied_masks(
    conn: Connection, masked: Mapping[str, frozenset[str]], schemas: Iterable[str] = ()
) -> list[DerivedMask]:
    """The columns that reference a masked column by a foreign key (directly or through another
    such copy), to be masked and withheld like it. The one knowledge of copies: `serve --mask`
    checks them at start-up and `grant --mask` withholds them.

    Args:
        conn: A connection (a call's session or an administrator's).
        masked: Table -> its masked columns: `table` in the default schema, `schema.table` in another.
        schemas: Schemas whose tables may hold a copy besides every schema the connection lists
            (the default schema's tables always do).
    """
    default, keys = _all_keys(conn, schemas)
    folded = {k.casefold(): {c.casefold() for c in cols} for k, cols in masked.items()}
    found: dict[tuple[str | None, str], dict[str, str]] = {}
    changed = True
    while changed:  # a copy of a copy: until nothing new is found
        changed = False
        for (schema, table), refs in keys.items():
            mine = folded.setdefault(_name(schema, table), set())
            for column, target_schema, target, referenced in refs:
                target_schema = None if target_schema == default else target_schema
                if (
                    referenced.casefold() in folded.get(_name(target_schema, target), set())
                    and column.casefold() not in mine
                ):
                    mine.add(column.casefold())
                    found.setdefault((schema, table), {})[column] = (
                        f"{_name(target_schema, target)}.{referenced}"
                    )
                    changed = True
    return [
        DerivedMask(
            f"{schema}.{table}" if schema else table,
            schema,
            table,
            frozenset(cols),
            "a foreign key copies " + ", ".join(sorted(cols.values())),
        )
        for (schema, table), cols in found.items()
    ]


Derive = Callable[[Connection, Mapping[str, frozenset[str]]], list[DerivedMask]]


def derived_and_copied(
    derive: Derive,
    conn: Connection,
    masked: Mapping[str, frozenset[str]],
    named: Mapping[str, frozenset[str]] | None = None,
    schemas: Iterable[str] = (),
) -> list[DerivedMask]:
    """What the database derives from masked columns (`derive`: the profile's generated columns,
    partitions, ...) and what foreign keys copy of them, each applied to the other's results until
    nothing new is found: a foreign-key copy of a generated column, or a generated column over a
    copy, holds the masked value as well (red team mask17 F1: both answered e-mails in clear).

    Args:
        derive: `Profile.derived_masks`.
        conn: A connection (a call's session or an administrator's).
        masked: Table -> masked columns, keyed as `derive` resolves tables.
        named: The same keyed as `copied_masks` reads them, where that differs (`masked` if None).
        schemas: Passed on to `copied_masks`.
    """
    default = inspect(conn).default_schema_name
    current, plain = dict(masked), dict(masked if named is None else named)
    seen = {k.casefold(): {c.casefold() for c in cols} for k, cols in plain.items()}
    out: list[DerivedMask] = []
    for _ in range(_ROUNDS):
        fresh = []
        for d in [*derive(conn, current), *copied_masks(conn, plain, schemas)]:
            key = _name(None if d.schema == default else d.schema, d.table)
            if key in seen and all(c.casefold() in seen[key] for c in d.columns):
                continue  # no column: a table that reads a masked table's rows (rt30 F1), once
            known = seen.setdefault(key, set())
            known |= {c.casefold() for c in d.columns}
            current[d.key] = current.get(d.key, frozenset()) | d.columns
            plain[key] = plain.get(key, frozenset()) | d.columns
            fresh.append(d)
        if not fresh:
            break
        out += fresh
    return out


_ROUNDS = 8  # each round adds a column or stops; real schemas settle in two
