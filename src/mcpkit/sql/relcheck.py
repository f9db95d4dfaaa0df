"""Re-verification of what the per-call masking analysis was built on (red team rt33c F1, F2).

Start-up reflects the relations and expands the mask rules (literal, glob, derived) once; every
call is analysed against that. When the catalog fingerprint moves while serving, the
re-verification (`reverify.Guard`) also runs `relations_check`: it reads the relations again in
the call's session (`Profile.relations_sql`, one query) and refuses the engine until a restart
when

- a relation the analysis knows now goes by another known name (PostgreSQL: a known oid under
  another name; a rename swap: the masked table under an unmasked name answered its e-mail scan
  order, F1). A table dropped and created again under its name is not refused: the rules and the
  withholding apply by name, and its privileges are checked again (`maskcheck.masks_check`);
- the masked columns differ: a rule now matches a column it did not (`ALTER TABLE plain ADD
  COLUMN ssn` or `RENAME COLUMN name TO ssn` under a `*.ssn` rule, on a table granted whole: the
  column answered in clear, F2), or no longer matches one it did;
- a literal rule now certainly names no column (start-up refuses that: `masking.literals`);
- a new relation on the name path comes before a known one of the same name (the database would
  resolve the name to it, the analysis to the known one).

A column added to a table that no rule matches, a new relation elsewhere or a dropped one pass:
the analysis refuses names it does not know (a new table is refused per call, masked columns or
not), and the database names it no longer has.
MySQL/MariaDB have no relation identity to read (a table's CREATE_TIME moves with any ALTER) and
keep privileges by name; columns the account cannot see are not listed, so a literal rule whose
column is not listed is probed (`SELECT * ... WHERE 1 = 0`: only a table read whole is certain).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.masking.policy import MaskPolicy

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from mcpkit.sql.engines.engine import SqlEngine
    from mcpkit.sql.reverify import Verify
    from mcpkit.sql.service import Masking

__all__ = ["Relations", "read_relations", "relation_changes", "relations_check", "startup_relations"]

Relations = Mapping[tuple[str, str], tuple[int | None, tuple[str, ...]]]
"""`(schema, relation)` -> (identity or None, its columns in table order)."""


def read_relations(engine: SqlEngine, conn: Connection) -> Relations | None:
    """The relations of `Profile.relations_sql` in this session; None where the profile has none."""
    sql: str | None = getattr(engine.profile, "relations_sql", None)
    if sql is None:
        return None
    out: dict[tuple[str, str], tuple[int | None, tuple[str, ...]]] = {}
    with engine.profile.catalog_reads(conn):
        rows = conn.execute(text(sql)).all()
    for schema, table, identity, column in rows:
        key = (str(schema), str(table))
        _, columns = out.get(key, (None, ()))
        named = (str(column),) if column is not None else ()
        out[key] = (None if identity is None else int(identity), columns + named)
    return out


def startup_relations(engine: SqlEngine) -> Relations | None:
    """`read_relations` at start-up, before the masks are reflected: a change after this read
    shows to the re-verification."""
    if getattr(engine.profile, "relations_sql", None) is None:
        return None
    with engine.session(30.0, "startup-masks") as (conn, _):
        return read_relations(engine, conn)


def _masked(policy: MaskPolicy, relations: Relations) -> set[tuple[str, str, str]]:
    return {(s, t, c) for (s, t), (_, cols) in relations.items() for c in cols if policy.masks(s, t, c)}


def _whole(conn: Connection, schema: str, table: str) -> bool:
    """Whether the session reads every column of the table (only asked on MySQL/MariaDB, where a
    failed statement leaves the transaction usable)."""
    quote = conn.dialect.identifier_preparer.quote
    try:
        conn.exec_driver_sql(f"SELECT * FROM {quote(schema)}.{quote(table)} WHERE 1 = 0").fetchall()
    except DBAPIError:
        return False
    return True


def _unmatched(engine: SqlEngine, conn: Connection, policy: MaskPolicy, now: Relations) -> list[str]:
    """The literal rules of the masks file that now certainly name no column."""
    complete = engine.profile.catalog_complete
    found = []
    for rule in policy.rules:
        if not rule.literal or rule.source.endswith("(derived)"):
            continue
        tables = [(s, t) for s, t in now if rule.covers_table(s, t)]
        if any(rule.column in {c.casefold() for c in now[key][1]} for key in tables):
            continue
        if complete and not tables:
            found.append(f"mask {rule.source!r} names no table now")
        elif tables and (complete or all(_whole(conn, s, t) for s, t in tables)):
            found.append(f"mask {rule.source!r} names no column now")
    return found


def relation_changes(
    before: Relations, now: Relations, policy: MaskPolicy, path: tuple[str, ...] = ()
) -> list[str]:
    """What changed since start-up that the analysis would not see (module docstring), one
    sentence each; empty when nothing did.

    >>> swapped = {("s", "a"): (2, ()), ("s", "b"): (1, ())}
    >>> relation_changes({("s", "a"): (1, ()), ("s", "b"): (2, ())}, swapped, MaskPolicy())
    ['relation s.b is now named s.a', 'relation s.a is now named s.b']
    >>> before = {("public", "plain"): (7, ("id", "name"))}
    >>> relation_changes(before, {("public", "plain"): (7, ("id", "name", "ssn"))}, MaskPolicy.of(["*.ssn"]))
    ['column public.plain.ssn is masked now, not at start-up']
    >>> relation_changes(before, {("public", "plain"): (7, ("id", "name", "note"))}, MaskPolicy.of(["*.ssn"]))
    []
    """
    was_named: dict[int | None, tuple[str, str]] = {
        identity: key for key, (identity, _) in before.items() if identity is not None
    }
    moved = {key: was_named.get(now[key][0]) for key in before.keys() & now.keys()}
    changes = [
        f"relation {'.'.join(old)} is now named {'.'.join(key)}"
        for key, old in sorted(moved.items())
        if old is not None and old != key
    ]
    was, found = _masked(policy, before), _masked(policy, {k: v for k, v in now.items() if k in before})
    changes += [f"column {s}.{t}.{c} is masked now, not at start-up" for s, t, c in sorted(found - was)]
    changes += [f"column {s}.{t}.{c} was masked at start-up, not now" for s, t, c in sorted(was - found)]
    order = {schema: i for i, schema in reversed(list(enumerate(path)))}
    known: dict[str, int] = {}
    for s, t in before:
        if s in order:
            known[t] = min(order[s], known.get(t, len(path)))
    changes += [
        f"relation {s}.{t} is new and comes first on the name path"
        for s, t in sorted(now.keys() - before.keys())
        if s in order and order[s] < known.get(t, -1)
    ]
    return changes


def relations_check(masking: Masking, before: Relations | None = None) -> Verify | None:
    """`relation_changes` and the literal rules (`_unmatched`) as a re-verification step (a
    `reverify.Verify`), against what `startup_relations` read (`before`, default the account's,
    `masking.relations`: a `--role-map` login sees its own); None when nothing was read."""
    before = masking.relations if before is None else before
    if before is None:
        return None
    policy, path = masking.policy, masking.schema.path

    def verify(engine: SqlEngine, conn: Connection) -> None:
        now = read_relations(engine, conn)
        if now is None:
            return
        changes = relation_changes(before, now, policy, path) + _unmatched(engine, conn, policy, now)
        if changes:
            raise SqlConfigError(
                "--mask: the tables or columns changed since start-up ("
                + "; ".join(changes)
                + "); the masks and the analysis of calls are those of start-up: restart the server"
            )

    return verify
