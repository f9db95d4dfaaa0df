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
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.mysql.mask_routes import _SYSTEM
from mcpkit.sql.profiles.mysql.routine_relations import SYSTEM_SCHEMAS, body_calls
from mcpkit.sql.profiles.mysql.routine_tokens import readings

__all__ = ["mysql_catalog_routines"]

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
