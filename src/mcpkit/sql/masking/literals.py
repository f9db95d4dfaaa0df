"""A literal mask rule (no glob) must name a column that exists (red team mask17 F5).

A typo (`peple.ssn`) or a column renamed by a migration left the rule matching nothing: start-up
said ok and the column was served in clear. PostgreSQL and SQLite show every table and column name
to any account (`pg_class`/`pg_attribute`, `sqlite_master`), so a literal rule that names a table
or column that does not exist stops start-up with the file, the line and what is wrong. MySQL and
MariaDB list only what the account holds a privilege on (`Profile.catalog_complete` False): a
column missing from a table the account reads whole is still certain (refused), a table it cannot
see at all is only warned about (a typo, or a table it is not granted), and a column of a table it
reads through column grants cannot be told from a withheld one (docs/masking.md). Globs stay
lenient: `*.ssn` may match nothing.
"""

from __future__ import annotations

from contextlib import suppress

from sqlalchemy import inspect
from sqlalchemy.engine import Connection, Inspector
from sqlalchemy.exc import DBAPIError

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.masking.policy import MaskPolicy, MaskRule

__all__ = ["require_matched", "unmatched_rules"]


def _tables(insp: Inspector, rule: MaskRule, system: frozenset[str]) -> list[tuple[str | None, str]]:
    """`(schema, table)` of every table or view the rule's table (and schema) names (the inspector
    caches each listing across rules)."""
    schemas: list[str | None] = [
        s for s in insp.get_schema_names() if s.casefold() not in system and not s.startswith(("pg_", "temp"))
    ]
    found: list[tuple[str | None, str]] = []
    for schema in schemas or [None]:
        if rule.schema is not None and (schema or "").casefold() != rule.schema:
            continue
        names = [*insp.get_table_names(schema), *insp.get_view_names(schema)]
        with suppress(NotImplementedError):  # a dialect without materialized views
            names += insp.get_materialized_view_names(schema)
        if insp.dialect.name == "postgresql":  # foreign tables: the PostgreSQL dialect's own call
            names += getattr(insp, "get_foreign_table_names")(schema)  # noqa: B009
        found += [(schema, t) for t in names if t.casefold() == rule.table]
    return found


def _whole(conn: Connection, schema: str | None, table: str) -> bool:
    """Whether the account reads every column of the table (so the catalog lists them all)."""
    quote = conn.dialect.identifier_preparer.quote
    name = f"{quote(schema)}.{quote(table)}" if schema else quote(table)
    try:  # only asked where the catalog is not complete (MySQL/MariaDB: no aborted transaction)
        conn.exec_driver_sql(f"SELECT * FROM {name} WHERE 1 = 0").fetchall()
    except DBAPIError:
        return False
    return True


def unmatched_rules(engine: SqlEngine, policy: MaskPolicy) -> tuple[list[str], list[str]]:
    """The literal rules that name no column: (certain, refused at start-up; unsure, warned), one
    sentence each with the masks file's line."""
    errors: list[str] = []
    warnings: list[str] = []
    complete = engine.profile.catalog_complete
    system = engine.profile.system_schemas
    with engine.sa_engine.connect() as conn:
        insp = inspect(conn)
        for rule in policy.rules:
            if not rule.literal:
                continue
            where = f"{rule.where}mask {rule.source!r} matches no column: "
            place = f"{rule.schema}.{rule.table}" if rule.schema else rule.table
            tables = _tables(insp, rule, system)
            if not tables:
                if complete:
                    errors.append(f"{where}there is no table or view {place} (a typo, or a renamed table?)")
                else:
                    warnings.append(
                        f"{where}no table or view {place} is visible to this account (a typo, or a table "
                        "it holds no privilege on, which it then cannot read)"
                    )
                continue
            try:
                listed = [c for s, t in tables for c in insp.get_columns(t, s)]
            except DBAPIError:  # MariaDB refuses SHOW CREATE TABLE to column grants: cannot tell
                continue
            if rule.column in {str(c["name"]).casefold() for c in listed}:
                continue
            if complete or all(_whole(conn, s, t) for s, t in tables):
                errors.append(f"{where}{place} has no column {rule.column} (a typo, or a renamed column?)")
    return errors, warnings


def require_matched(engine: SqlEngine, policy: MaskPolicy) -> list[str]:
    """The unsure sentences of `unmatched_rules` (to warn about), after refusing the certain ones.

    Raises:
        SqlConfigError: a literal rule names a table or column that does not exist (file:line each);
            start-up and `mcpkit sql grant --mask` refuse alike.
    """
    errors, warnings = unmatched_rules(engine, policy)
    if errors:
        lines = "\n".join(f"  {e}" for e in errors)
        raise SqlConfigError(f"--mask: a rule names a column that does not exist:\n{lines}")
    return warnings
