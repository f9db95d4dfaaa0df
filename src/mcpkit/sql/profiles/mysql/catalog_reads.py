"""MariaDB stored functions whose body reads the database's catalog (red team rt33b F3).

Every account reads information_schema, which shows the row counts, sizes and bounds of each
partition of a table it holds any privilege on: a function over `information_schema.PARTITIONS` of a
table partitioned by a masked e-mail answers its histogram ("4 below 'n', 2 from 'n'"); `TABLES`
sizes and `STATISTICS` cardinalities likewise. The agent's own queries cannot name a system schema
(admission), but an INVOKER function it may call runs with its rights, and the database allows it.
So each function the account can execute (information_schema.ROUTINES lists those) whose body names
a relation or routine of a system schema (`db.x` with `db` one of `SYSTEM_SCHEMAS`, in any reading
of the body: `routine_tokens`), or calls one that does at any depth, counts. A body the account
cannot read is the stored-query check's (a hidden body of a function calls may use is a finding).

A view reads with its reader's rights when SQL SECURITY INVOKER, and the reader's own rights read
information_schema: every view whose definition names a system schema counts, INVOKER too
(`mysql_catalog_views`, red team rt35b F2: `v_parts` over `information_schema.PARTITIONS` answered
the histogram of the masked e-mail a table was partitioned by). A view whose definition is hidden is
the least-privilege check's (`views.view_body_findings` refuses it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.mysql.mask_routes import _SYSTEM
from mcpkit.sql.profiles.mysql.roles import rows_under_any_role
from mcpkit.sql.profiles.mysql.routine_relations import SYSTEM_SCHEMAS, body_calls
from mcpkit.sql.profiles.mysql.routine_tokens import readings
from mcpkit.sql.profiles.mysql.views import VIEW_BODIES

__all__ = ["SYSTEM_NAMES", "catalog_read", "mysql_catalog_routines", "mysql_catalog_views"]

SYSTEM_NAMES: Final = ", ".join(sorted(SYSTEM_SCHEMAS))

_ROUTINES: Final = (
    "SELECT routine_schema, routine_name, routine_definition, routine_type FROM information_schema.ROUTINES"
    f" WHERE routine_schema NOT IN {_SYSTEM} ORDER BY routine_schema, routine_name"
)


_READS: Final = "it reads the database's catalog"


def catalog_read(body: str) -> str | None:
    """The first system-schema object `body` names (`information_schema.PARTITIONS`), or None.

    >>> catalog_read("RETURN (SELECT table_rows FROM /*!50000 `INFORMATION_SCHEMA`.PARTITIONS */)")
    'INFORMATION_SCHEMA.PARTITIONS'
    >>> catalog_read("RETURN (SELECT 'information_schema.x' FROM t)") is None
    True
    """
    for tokens in readings(body):
        for at, token in enumerate(tokens[:-1]):
            if (
                token.kind in ("name", "quoted")
                and token.text.casefold() in SYSTEM_SCHEMAS
                and tokens[at + 1] == ("char", ".")
            ):
                after = tokens[at + 2].text if at + 2 < len(tokens) else ""
                return f"{token.text}.{after}"
    return None


def mysql_catalog_routines(conn: Connection) -> dict[tuple[str, str], str]:
    """Each stored function the account sees ((database, name) as stored) whose body reads the
    catalog, itself or through a routine it calls -> why."""
    rows = [(str(s), str(n), str(b or ""), str(k)) for s, n, b, k in conn.execute(text(_ROUTINES))]
    why: dict[str, str] = {}  # case-folded routine name -> why
    for _, name, body, _ in rows:
        read = catalog_read(body)
        if read is not None:
            why.setdefault(
                name.casefold(), f"it reads the database's catalog ({read}), which describes masked columns"
            )
    changed = True
    while changed:  # a routine calling one that reads the catalog reads it too
        changed = False
        for schema, name, body, _ in rows:
            if name.casefold() in why or not body:
                continue
            called = next((c for _, c in body_calls(body, schema) if c.casefold() in why), None)
            if called is not None:
                why[name.casefold()] = f"it calls {called}, which reads the database's catalog"
                changed = True
    return {(s, n): why[n.casefold()] for s, n, _, kind in rows if kind == "FUNCTION" and n.casefold() in why}


def mysql_catalog_views(conn: Connection) -> dict[tuple[str, str], str]:
    """Each view outside the system schemas the account can read, as the session is or under a role
    granted to it ((database, name) as stored), whose definition names a system schema -> why."""

    def run(sql: str) -> Sequence[tuple[Any, ...]]:
        result = conn.exec_driver_sql(sql)
        return [tuple(r) for r in result.all()] if result.returns_rows else []

    rows = rows_under_any_role(run, VIEW_BODIES)
    out: dict[tuple[str, str], str] = {}
    for schema, name, definition in rows:
        if str(schema).casefold() in SYSTEM_SCHEMAS or not definition:
            continue
        read = catalog_read(str(definition))
        if read is not None:
            out[(str(schema), str(name))] = (
                f"reads the database's catalog ({read}) with the reader's rights, which describes"
                " masked columns (row counts and sizes per partition)"
            )
    return out
